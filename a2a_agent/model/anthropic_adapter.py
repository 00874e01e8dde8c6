"""The one module that talks to the anthropic SDK."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import httpx2

from a2a_agent.errors import ModelError
from a2a_agent.model import DEFAULT_MODEL
from a2a_agent.model.types import JSON, ModelRequest, ModelResponse, Usage

__all__ = ["DEFAULT_MODEL", "AnthropicModel"]


# A 429 or 529 that names no wait: the SDK's own first backoff is about this long.
DEFAULT_PAUSE_S = 1.0


def retry_after(headers: httpx2.Headers) -> float:
    """The wait a rate-limited answer asks for, in seconds (the SDK reads the same headers)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers.get(name, "")) / scale)
        except ValueError:
            continue
    return DEFAULT_PAUSE_S


class AnthropicModel:
    """`Model` over the Messages API; the SDK retries 429, 529 and 5xx with our limits.

    `rate_limited` hears of every 429 and 529 the API answers (retries included) with the
    wait it asked for, so the worker can hold back its other calls, not only this one."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 4,
        max_connections: int = 1000,
        rate_limited: Callable[[float], None] | None = None,
    ) -> None:
        self.name = model
        self._rate_limited = rate_limited
        http = anthropic.DefaultAsyncHttpxClient(
            limits=httpx2.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            event_hooks={"response": [self._heard]},
        )
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=max_retries,
            http_client=http,
        )

    async def _heard(self, response: httpx2.Response) -> None:
        if response.status_code in (429, 529) and self._rate_limited is not None:
            self._rate_limited(retry_after(response.headers))

    async def close(self) -> None:
        await self._client.close()

    @staticmethod
    def _params(request: ModelRequest, model: str) -> dict[str, Any]:
        # The stable prefix (tools, then the system prompt) is cached; so is the first user
        # message, which holds the goal and the plan for the whole item.
        tools: list[JSON] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if tools:
            tools[-1]["cache_control"] = {"type": "ephemeral"}
        messages = [dict(m) for m in request.messages]
        if messages and isinstance(messages[0].get("content"), list) and messages[0]["content"]:
            first = [dict(b) for b in messages[0]["content"]]
            first[-1]["cache_control"] = {"type": "ephemeral"}
            messages[0] = {**messages[0], "content": first}
        params: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens,
            "system": [
                {"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}
            ],
            "messages": messages,
        }
        if tools:
            params["tools"] = tools
        if request.force_tool:
            params["tool_choice"] = {"type": "tool", "name": request.force_tool}
        return params

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            message = await self._client.messages.create(**self._params(request, self.name))
        except anthropic.APIStatusError as exc:
            raise ModelError(f"the model API answered {exc.status_code}: {exc.message}") from exc
        except anthropic.APIConnectionError as exc:
            raise ModelError(f"the model API could not be reached: {exc}") from exc
        content: list[JSON] = []
        for block in message.content:
            if block.type == "text":
                content.append({"type": "text", "text": block.text})
            elif block.type == "tool_use":
                content.append(
                    {
                        "type": "tool_use",
                        "id": block.id,
                        "name": block.name,
                        "input": dict(block.input) if isinstance(block.input, dict) else {},
                    }
                )
        usage = message.usage
        return ModelResponse(
            content=content,
            stop_reason=str(message.stop_reason or "end_turn"),
            usage=Usage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_input_tokens or 0,
                cache_write_tokens=usage.cache_creation_input_tokens or 0,
            ),
            model=message.model,
        )
