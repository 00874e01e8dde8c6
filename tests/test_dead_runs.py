"""A run the engine gave up on does not leave its task working for ever.

DBOS dead-letters a workflow recovered more times than its limit, and marks one ERROR when
an exception escapes it; either way nothing would move the task again, and a workflow in
ERROR cannot even be resumed. The supervisor fails such a task with a reason a person can
read, and starts a segment of its own that closes its record (the report, the final commit)
like any other stop."""

from __future__ import annotations

import asyncio
from typing import LiteralString

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from tests.support.a2a import a2a_client, plan_of, report_of, wait_for
from tests.support.processes import StartAgent
from tests.support.workflows import queued_behind_a_blocker, workflow_status

FAILED = TaskState.TASK_STATE_FAILED
# As if the run had been recovered a thousand times (a crash loop): DBOS's own claim
# dead-letters it when the queue hands it out.
CRASH_LOOPED = (
    "UPDATE dbos.workflow_status SET recovery_attempts = 1000"
    " WHERE workflow_uuid = %s AND status = 'ENQUEUED'"
)
# As DBOS leaves a workflow an exception escaped (the chaos storm once made one: a commit
# and then the failing of the run both met a killed git's lock).
ERRORED = (
    "UPDATE dbos.workflow_status SET status = 'ERROR', error = 'planted by the test'"
    " WHERE workflow_uuid = %s AND status = 'ENQUEUED'"
)


@pytest.mark.parametrize(
    ("change", "status"),
    [(CRASH_LOOPED, "MAX_RECOVERY_ATTEMPTS_EXCEEDED"), (ERRORED, "ERROR")],
    ids=["dead-lettered", "error"],
)
async def test_a_dead_run_fails_its_task_and_closes_the_record(
    start_agent: StartAgent, database_url: str, change: LiteralString, status: str
) -> None:
    # One run at a time: the second task waits in the queue while the first one's command runs.
    server = start_agent(A2A_AGENT_WORKER_CONCURRENCY="1")
    async with a2a_client(server.url) as client:
        _, queued = await queued_behind_a_blocker(client, database_url, change)
        final = await wait_for(client, queued, {FAILED}, timeout=60)
        for _ in range(600):  # the segment that closes the record follows the failing
            if any(a.artifact_id == "report" for a in final.artifacts):
                break
            await asyncio.sleep(0.1)
            final = await client.get_task(GetTaskRequest(id=queued))
    assert "ended unexpectedly" in final.status.message.parts[0].text
    assert f"engine status {status}" in final.status.message.parts[0].text
    # Its record closed as any stop's does: a report, the item never begun. (Once, under the
    # suite's load, no report came within 30 s: the server's log says what it waited on.)
    assert any(a.artifact_id == "report" for a in final.artifacts), server.log()[-6000:]
    assert report_of(final)["remaining"] == ["b"]
    assert [i["status"] for i in plan_of(final)["items"]] == ["pending"]
    closing = f"{queued}:s1"
    for _ in range(100):
        if await workflow_status(database_url, closing) == "SUCCESS":
            break
        await asyncio.sleep(0.1)
    assert await workflow_status(database_url, closing) == "SUCCESS"
    assert await workflow_status(database_url, queued) == status  # the dead one stays dead
