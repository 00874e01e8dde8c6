"""Messages, tool calls and usage as plain JSON-able dataclasses (they are step outputs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def context_tokens(self) -> int:
        """Everything the model read for this call, cached or not."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def as_json(self) -> JSON:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }

    @classmethod
    def from_json(cls, data: JSON) -> Usage:
        return cls(
            **{
                k: int(data.get(k, 0))
                for k in (
                    "input_tokens",
                    "output_tokens",
                    "cache_read_tokens",
                    "cache_write_tokens",
                )
            }
        )


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: JSON


@dataclass(frozen=True)
class ModelRequest:
    """A Messages API request in our terms. `messages` are plain role/content dicts whose
    content blocks are {"type": "text"|"tool_use"|"tool_result", ...}."""

    system: str
    messages: list[JSON]
    tools: list[ToolSpec] = field(default_factory=list)
    max_tokens: int = 4096
    force_tool: str | None = None

    def as_json(self) -> JSON:
        return {
            "system": self.system,
            "messages": self.messages,
            "tools": [t.__dict__ for t in self.tools],
            "max_tokens": self.max_tokens,
            "force_tool": self.force_tool,
        }

    @classmethod
    def from_json(cls, data: JSON) -> ModelRequest:
        return cls(
            system=data["system"],
            messages=list(data["messages"]),
            tools=[ToolSpec(**t) for t in data.get("tools", [])],
            max_tokens=int(data.get("max_tokens", 4096)),
            force_tool=data.get("force_tool"),
        )


@dataclass(frozen=True)
class ModelResponse:
    content: list[JSON]
    stop_reason: str
    usage: Usage
    model: str

    @property
    def text(self) -> str:
        return "\n".join(b["text"] for b in self.content if b.get("type") == "text").strip()

    @property
    def tool_uses(self) -> list[JSON]:
        return [b for b in self.content if b.get("type") == "tool_use"]

    def as_json(self) -> JSON:
        return {
            "content": self.content,
            "stop_reason": self.stop_reason,
            "usage": self.usage.as_json(),
            "model": self.model,
        }

    @classmethod
    def from_json(cls, data: JSON) -> ModelResponse:
        return cls(
            content=list(data["content"]),
            stop_reason=str(data["stop_reason"]),
            usage=Usage.from_json(data["usage"]),
            model=str(data["model"]),
        )


def user_text(text: str) -> JSON:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(response: ModelResponse) -> JSON:
    return {"role": "assistant", "content": response.content}


def tool_results(results: list[JSON]) -> JSON:
    """`results` are {"tool_use_id", "content": str, "is_error": bool}."""
    return {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": r["tool_use_id"],
                "content": r["content"],
                "is_error": bool(r.get("is_error", False)),
            }
            for r in results
        ],
    }
