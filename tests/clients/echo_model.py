"""The service's model, faked for clients that can send only text (Strands): a goal whose
text carries `PLAN-JSON: {...}` is "planned" as exactly that plan, and an item titled
`ASK <question>` is worked by asking a person (the model's `ask_person` tool). Nothing on the
orchestrator's side is a model; this stands in for the service's own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply

MARK = "PLAN-JSON:"


def _texts(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages", []))


def respond(body: dict[str, Any]) -> dict[str, Any]:
    if (body.get("tool_choice") or {}).get("name") == "submit_plan":
        first = body["messages"][0]["content"]
        text = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first)
        plan = json.loads(text[text.index(MARK) + len(MARK) :].strip().split("\n\n")[0])
        return tool_reply("submit_plan", plan)
    texts = _texts(body)
    if "ASK " in texts and "tool_result" not in texts:
        question = texts.split("ASK ", 1)[1].split("\\n", 1)[0].strip()
        return tool_reply("ask_person", {"question": question})
    return text_reply("done")


@contextmanager
def echo_model() -> Iterator[dict[str, str]]:
    """The environment that gives a server this model."""
    with FakeAnthropic() as fake:
        fake.add(*[respond] * 500)
        yield model_env(fake)
