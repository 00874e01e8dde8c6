"""fasta2a 2.x (pydantic-ai's A2A client): 0.3 method names (`message/send`, `message/stream`,
`tasks/get`) without an `A2A-Version` header, but 1.0-shaped results (`{"task": ...}` from a
send, `{"statusUpdate": ...}` on a stream) and a 1.0 card model that does not read 1.0's own
proto JSON. No cancel, resubscribe or push in its client."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.clients.harness import (
    ASK_ITEMS,
    COMPLETED,
    QUICK_ITEMS,
    Served,
    answer_written,
    check_record,
    expect,
    no_error,
    record_now,
    run_driver,
    tag,
    tasks_tagged,
)
from tests.clients.venvs import FASTA2A, client_python
from tests.support.a2a import plan_of

pytestmark = pytest.mark.clients

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED


@pytest.fixture(scope="module")
def python() -> Path:
    return client_python(FASTA2A)


async def test_fasta2a_sends_plans_the_server_runs_but_reads_no_task_back_and_cannot_poll(
    served: Served, python: Path
) -> None:
    mark = tag()
    sent = run_driver(
        python,
        "drive_fasta2a.py",
        {
            "url": served.url,
            "key": served.key,
            "tag": mark,
            "scenarios": ["discover", "send_quick", "send_ask", "stream"],
        },
    )
    problems: list[str] = []
    no_error(problems, sent, "discover", "send_quick", "send_ask", "stream")
    # Its card model wants `securityRequirements[].schemes.<name>` as a list of strings; 1.0's
    # proto JSON writes the StringList message (`{}` when empty, else `{"list": [...]}`).
    card = sent.scenario("discover")
    expect(problems, "securityRequirements" in str(card.get("card_error")), f"card: {card}")
    # The server answers `message/send` (a 0.3 method, no A2A-Version) with the 0.3 result,
    # the Task itself; fasta2a's model wants 1.0's `{"task": {...}}` and its TypedDict drops
    # every key it does not know, so the result it hands back is empty: no task id.
    for name in ("send_quick", "send_ask"):
        found = sent.scenario(name)
        expect(problems, found.get("result_keys") == [], f"{name}: fasta2a now parses {found}")
    # The same on the stream: 0.3 events (`kind: status-update`) are not 1.0's keys.
    stream = sent.scenario("stream")
    expect(problems, stream.get("events", 0) > 2, f"stream: {stream}")
    expect(problems, stream.get("result_keys") == [], f"stream: fasta2a now parses {stream}")

    # The server ran what it was sent, whatever the client made of the answers.
    tasks = {
        str(plan_of(t)["goal"]).replace(mark, "").strip(): t
        for t in await tasks_tagged(served, mark)
    }
    expect(problems, sorted(tasks) == ["ask", "quick", "quick stream-"], f"goals: {list(tasks)}")
    for goal in ("quick", "quick stream-"):
        if goal in tasks:
            await check_record(
                served, problems, goal, tasks[goal].id, state=COMPLETED, items=QUICK_ITEMS
            )
    if problems:  # what follows needs the tasks
        raise AssertionError("\n".join(problems))

    # A caller that knows the ids (here: from the server's record). `tasks/get` fails: fasta2a
    # sends `"id": null`, which 0.3's GetTaskRequest does not allow. An answer on the same task
    # (message/send with taskId) is taken, though its reply again parses as {}.
    ask = await record_now(served, tasks["ask"].id)
    expect(problems, ask.status.state == INPUT_REQUIRED, f"ask: {ask.status}")
    followed = run_driver(
        python,
        "drive_fasta2a.py",
        {
            "url": served.url,
            "key": served.key,
            "quick_id": tasks["quick"].id,
            "ask_id": ask.id,
            "ask_context_id": ask.context_id,
            "scenarios": ["follow_poll", "follow_answer"],
        },
    )
    no_error(problems, followed, "follow_answer")
    polled = followed.scenario("follow_poll")
    expect(problems, "-32600" in str(polled.get("get_error")), f"get_task: {polled}")
    answered = followed.scenario("follow_answer")
    expect(problems, answered.get("result_keys") == [], f"answer: {answered}")
    await check_record(served, problems, "answer", ask.id, state=COMPLETED, items=ASK_ITEMS)
    expect(problems, "Heron" in answer_written(served, ask.id), "answer not written")
    assert not problems, "\n".join(problems)
