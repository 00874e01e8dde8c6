"""A model whose calls wait for one of the worker's model slots."""

from __future__ import annotations

from a2a_agent.model import ModelClient
from a2a_agent.model.types import ModelRequest, ModelResponse
from a2a_agent.slots import Slots


class GatedModel:
    """Every call holds a slot while it is in flight (the SDK's retries included): the
    provider's limits are the worker's, however many runs it drives. A rate-limited answer
    pauses the slots (`Slots.pause`), so no new call starts until the wait it asked for."""

    def __init__(self, inner: ModelClient, slots: Slots) -> None:
        self.name = inner.name
        self.slots = slots
        self._inner = inner

    async def complete(self, request: ModelRequest) -> ModelResponse:
        async with self.slots.hold():
            return await self._inner.complete(request)

    async def close(self) -> None:
        await self._inner.close()
