"""Microsoft Agent Framework's A2AAgent (agent-framework-a2a, a2a-sdk 1.x: A2A 1.0 over
JSON-RPC): text, URL and raw-bytes parts only, so its plans travel as text and this module's
server has a (fake) model that plans the text's PLAN-JSON as given (tests/clients/
echo_model.py). Followed its own ways: `background=True` with `poll_task`, a continuation
token resumed by a fresh agent (SubscribeToTask), the streamed run, a cancel through the
a2a-sdk client it exposes, and a question answered on the same task through its session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.harness import (
    CANCELED,
    COMPLETED,
    QUICK_ITEMS,
    Served,
    answer_written,
    check_record,
    expect,
    no_error,
    run_driver,
    tag,
)
from tests.clients.venvs import AGENT_FRAMEWORK, client_python

pytestmark = pytest.mark.clients
NEEDS_MODEL = True  # the client sends text only: the service plans it (tests/clients/echo_model.py)

SPEC = AGENT_FRAMEWORK
SEED = "one from the caller's file\n"  # as the driver sends it (raw bytes, text/plain)
SCENARIOS = ["discover", "poll", "resume", "stream", "cancel", "input_required"]
IN_PROGRESS = {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}


@pytest.fixture(scope="module")
def python() -> Path:
    return client_python(SPEC)


async def test_agent_framework_a2a_agent_polls_resumes_streams_cancels_and_answers(
    served: Served, python: Path
) -> None:
    mark = tag()
    args = {"url": served.url, "key": served.key, "tag": mark, "scenarios": SCENARIOS}
    run = run_driver(python, "drive_agent_framework.py", args, timeout=180)
    problems: list[str] = []
    no_error(problems, run, *SCENARIOS)
    card = run.scenario("discover")
    expect(problems, card.get("sdk", "").startswith("1."), f"environment: {card}")
    expect(problems, card.get("name") == card.get("card_name"), f"name from the card: {card}")
    expect(problems, ["JSONRPC", "1.0"] in card.get("interfaces", []), f"card: {card}")

    # background=True: at once, a continuation token for the task; poll_task to the end.
    poll = run.scenario("poll")
    first = poll.get("first") or {}
    expect(problems, first.get("state") in IN_PROGRESS, f"poll: not at once: {first}")
    expect(problems, (first.get("token") or {}).get("task_id"), f"poll: no token: {first}")
    final = poll.get("final") or {}
    expect(problems, final.get("state") == "TASK_STATE_COMPLETED", f"poll: {final}")
    expect(problems, final.get("token") is None, f"poll: a token after the end: {final}")
    expect(problems, poll.get("polls", 0) >= 1, f"poll: {poll}")
    # The finished task's artifacts (plan, report, diff, bundle, files) become the response's
    # messages, the plan (its goal holds the tag) as JSON text.
    expect(problems, final.get("messages", 0) >= 2, f"poll: artifacts? {final}")
    expect(problems, final.get("mentions_tag") is True, f"poll: no plan in the response: {final}")
    task_id = poll.get("task_id")
    await check_record(served, problems, "poll", task_id, state=COMPLETED, items=QUICK_ITEMS)
    if isinstance(task_id, str):  # the raw-bytes part seeded the workspace; item one used it
        one = served.process.home / "workspaces" / task_id / "one.txt"
        expect(problems, one.exists() and one.read_text() == SEED, f"poll: {one} not the file")

    # A token kept as JSON and resumed by a fresh agent over REST: SubscribeToTask to the end.
    resume = run.scenario("resume")
    expect(
        problems,
        resume.get("transports") == ["JsonRpcTransport", "RestTransport"],
        f"resume: bindings {resume.get('transports')}",
    )
    expect(problems, (resume.get("first") or {}).get("state") in IN_PROGRESS, f"{resume}")
    resumed = resume.get("resumed") or {}
    expect(problems, resumed.get("state") == "TASK_STATE_COMPLETED", f"resume: {resumed}")
    expect(problems, resumed.get("token") is None, f"resume: {resumed}")
    await check_record(
        served, problems, "resume", resume.get("task_id"), state=COMPLETED, items=QUICK_ITEMS
    )

    stream = run.scenario("stream")
    expect(problems, stream.get("state") == "TASK_STATE_COMPLETED", f"stream: {stream}")
    expect(problems, len(stream.get("task_ids", [])) == 1, f"stream: one task? {stream}")
    await check_record(
        served, problems, "stream", stream.get("task_id"), state=COMPLETED, items=QUICK_ITEMS
    )

    # Cancel through the a2a-sdk client A2AAgent exposes; the resumed run sees it end.
    cancel = run.scenario("cancel")
    expect(problems, cancel.get("planned_state") == "TASK_STATE_WORKING", f"cancel: {cancel}")
    expect(problems, cancel.get("cancel_answer") == "TASK_STATE_CANCELED", f"cancel: {cancel}")
    followed = cancel.get("followed") or {}
    expect(problems, followed.get("state") == "TASK_STATE_CANCELED", f"cancel: {followed}")
    polled = cancel.get("polled") or {}
    expect(problems, polled.get("state") == "TASK_STATE_CANCELED", f"cancel: {polled}")
    expect(problems, polled.get("token") is None, f"cancel: {polled}")
    await check_record(served, problems, "cancel", cancel.get("task_id"), state=CANCELED, items=[])

    # The question: a user-input request on the response; the session answers the same task.
    asked = run.scenario("input_required")
    expect(problems, asked.get("asked_state") == "TASK_STATE_INPUT_REQUIRED", f"ask: {asked}")
    inputs = (asked.get("asked") or {}).get("inputs") or []
    expect(problems, any("What should it be called?" in i for i in inputs), f"ask: {asked}")
    expect(problems, len(asked.get("request_ids", [])) == 1, f"ask: {asked}")
    expect(
        problems,
        asked.get("answered_task_id") == asked.get("task_id"),
        f"the answer went to another task: {asked}",
    )
    expect(problems, asked.get("state") == "TASK_STATE_COMPLETED", f"after the answer: {asked}")
    task_id = asked.get("task_id")
    await check_record(
        served, problems, "input_required", task_id, state=COMPLETED, items=["name", "use"]
    )
    if isinstance(task_id, str):
        expect(problems, "Heron" in answer_written(served, task_id), "answer not written")
    assert not problems, "\n".join(problems)
