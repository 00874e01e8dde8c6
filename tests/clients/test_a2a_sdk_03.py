"""a2a-sdk 0.3.x, the client most 0.3 frameworks carry, over JSON-RPC and REST (A2A 0.3: no
`A2A-Version` header, so the server's 0.3 compatibility layer answers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.harness import (
    ASK_ITEMS,
    CANCELED,
    COMPLETED,
    QUICK_ITEMS,
    Served,
    answer_written,
    check_record,
    expect,
    no_error,
    push_shape,
    push_task_ids,
    run_driver,
    tag,
    verify_push_signature,
)
from tests.clients.venvs import A2A_SDK_03, client_python
from tests.support.receiver import receiver
from tests.support.secrets import secret

pytestmark = pytest.mark.clients

SCENARIOS = ["discover", "poll", "stream", "resubscribe", "push", "cancel", "input_required"]


@pytest.fixture(scope="module")
def python() -> Path:
    return client_python(A2A_SDK_03)


@pytest.mark.parametrize("transport", ["jsonrpc", "rest"])
async def test_a2a_sdk_03_client_drives_a_plan_every_way_it_offers(
    served: Served, python: Path, transport: str
) -> None:
    token = secret(f"push-{tag()}")
    with receiver() as hook:
        args = {
            "url": served.url,
            "key": served.key,
            "transport": transport,
            "tag": tag(),
            "push_url": hook.url,
            "push_token": token,
            "scenarios": SCENARIOS,
        }
        run = run_driver(python, "drive_a2a_sdk_03.py", args)
        problems: list[str] = []
        no_error(problems, run, *SCENARIOS)

        card = run.scenario("discover")
        expect(problems, card.get("protocol_version") == "0.3", f"card as 0.3 sees it: {card}")
        used = {"jsonrpc": "JsonRpcTransport", "rest": "RestTransport"}[transport]
        expect(problems, card.get("transport_used") == used, f"transport: {card}")

        for name in ("poll", "stream", "resubscribe", "push"):
            found = run.scenario(name)
            expect(problems, found.get("state") == "completed", f"{name}: {found}")
            await check_record(
                served, problems, name, found.get("task_id"), state=COMPLETED, items=QUICK_ITEMS
            )
        streamed = run.scenario("stream").get("states", [])
        expect(problems, streamed[-1:] == ["completed"], f"stream ended at {streamed}")
        resubscribed = run.scenario("resubscribe").get("states", [])
        expect(problems, resubscribed[-1:] == ["completed"], f"resubscribe: {resubscribed}")

        cancel = run.scenario("cancel")
        expect(problems, cancel.get("state") == "canceled", f"cancel: {cancel}")
        await check_record(
            served, problems, "cancel", cancel.get("task_id"), state=CANCELED, items=[]
        )

        asked = run.scenario("input_required")
        expect(problems, asked.get("asked_state") == "input-required", f"ask: {asked}")
        expect(problems, asked.get("state") == "completed", f"after the answer: {asked}")
        task_id = asked.get("task_id")
        await check_record(
            served, problems, "input_required", task_id, state=COMPLETED, items=ASK_ITEMS
        )
        if isinstance(task_id, str):
            expect(problems, "Heron" in answer_written(served, task_id), "answer not written")

        # Push: the config the 0.3 client sent with its message is honoured, in 0.3's shape
        # (the Task itself, as a 0.3 receiver parses it), signed like every notification.
        pushed_task = run.scenario("push").get("task_id")
        hook.wait_for(
            lambda: any(pushed_task in push_task_ids(r.body) for r in hook.accepted()), 30
        )
        mine = [r for r in hook.accepted() if pushed_task in push_task_ids(r.body)]
        expect(
            problems,
            {r.headers.get("x-a2a-notification-token") for r in mine} == {token},
            "push token",
        )
        bad = [verify_push_signature(served, r.headers, r.raw) for r in mine]
        expect(problems, not any(bad), f"push signatures: {bad}")
        shapes = {push_shape(r.body) for r in mine}
        expect(problems, shapes == {"0.3 task"}, f"push bodies for a 0.3 config: {shapes}")
    assert not problems, "\n".join(problems)
