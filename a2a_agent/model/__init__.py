"""The model layer: our own message types and the `Model` interface.

Only `anthropic_adapter.py` imports the anthropic SDK; everything else speaks these types.
"""

from __future__ import annotations

from typing import Protocol

from a2a_agent.model.types import ModelRequest, ModelResponse

# A current model of the installed SDK that it does not warn about (tests check both).
DEFAULT_MODEL = "claude-sonnet-5-5"


class Model(Protocol):
    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One Messages API call; raises ModelError (or a subclass) when it fails for good."""
        ...


class ModelClient(Model, Protocol):
    """A model the process holds a connection pool to, closed at shutdown."""

    async def close(self) -> None: ...
