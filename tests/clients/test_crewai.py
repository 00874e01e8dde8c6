"""CrewAI 1.15 (`crewai[a2a]`, a2a-sdk 0.3): the delegation its A2A wrapper runs, in each of
its update modes (streaming, polling, push to the caller's receiver with HMAC), an
input-required turn answered as its wrapper answers (the next turn, same task id), and an
operator's cancel seen by it. It sends text only: this module's server has the fake model
that plans the text's PLAN-JSON (tests/clients/echo_model.py)."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from tests.clients.harness import (
    ASK_ITEMS,
    CANCELED,
    COMPLETED,
    QUICK_ITEMS,
    Served,
    answer_written,
    cancel_when_seen,
    check_record,
    expect,
    finish_driver,
    no_error,
    push_shape,
    push_task_ids,
    start_driver,
    tag,
    verify_push_hmac,
    verify_push_signature,
)
from tests.clients.venvs import CREWAI, client_python
from tests.support.secrets import secret

pytestmark = pytest.mark.clients
NEEDS_MODEL = True  # the client sends text only: the service plans it (tests/clients/echo_model.py)

SCENARIOS = ["discover", "poll", "stream", "cancel", "input_required", "push"]


@pytest.fixture(scope="module")
def python() -> Path:
    return client_python(CREWAI)


async def test_crewai_delegation_polls_streams_takes_hmac_pushes_and_answers_a_question(
    served: Served, python: Path
) -> None:
    mark = tag()
    token = secret(f"push-{tag()}")
    hmac_secret = secret(f"hmac-secret-{tag()}-{tag()}")  # >= 16 bytes
    args = {
        "url": served.url,
        "key": served.key,
        "tag": mark,
        "push_token": token,
        "push_secret": hmac_secret,
        "scenarios": SCENARIOS,
    }
    started = time.monotonic()
    proc = start_driver(python, "drive_crewai.py", args)
    canceled_id = await cancel_when_seen(served, f"cancel-{mark}")
    run = finish_driver(proc, "drive_crewai.py", started, 150)
    print(f"drive_crewai.py: {run.seconds:.1f} s")
    problems: list[str] = []
    no_error(problems, run, *SCENARIOS)
    card = run.scenario("discover")
    expect(problems, card.get("protocol_version") == "0.3", f"card: {card}")
    expect(problems, str(card.get("sdk")).startswith("0.3"), f"environment: {card}")

    for name in ("poll", "stream", "push"):
        found = run.scenario(name)
        expect(problems, found.get("state") == "completed", f"{name}: {found}")
        await check_record(
            served, problems, name, found.get("task_id"), state=COMPLETED, items=QUICK_ITEMS
        )

    # CrewAI reports the operator's cancel as the state `canceled` with the status text as
    # its error; its result's history then holds no task id (only the message it sent).
    cancel = run.scenario("cancel")
    expect(problems, cancel.get("state") == "canceled", f"cancel: {cancel}")
    expect(problems, "cancel" in str(cancel.get("reported_error")), f"cancel: {cancel}")
    await check_record(served, problems, "cancel", canceled_id, state=CANCELED, items=[])

    asked = run.scenario("input_required")
    expect(problems, asked.get("asked_state") == "input-required", f"ask: {asked}")
    expect(
        problems,
        asked.get("answered_task_id") == asked.get("task_id"),
        f"the follow-up went to another task: {asked}",
    )
    expect(problems, asked.get("state") == "completed", f"after the answer: {asked}")
    task_id = asked.get("task_id")
    await check_record(
        served, problems, "input_required", task_id, state=COMPLETED, items=ASK_ITEMS
    )
    if isinstance(task_id, str):
        expect(problems, "Heron" in answer_written(served, task_id), "answer not written")

    # Push: every notification CrewAI's receiver got is the 0.3 Task, carries the token, and
    # verifies with the HMAC secret alone (both header forms) and with the ES256 JWT.
    push = run.scenario("push")
    received = [(dict(r["headers"]), base64.b64decode(r["raw"])) for r in push.get("received", [])]
    mine = [
        (h, raw) for h, raw in received if push.get("task_id") in push_task_ids(json.loads(raw))
    ]
    expect(problems, len(mine) >= 2, f"notifications for the push task: {len(mine)}")
    expect(
        problems,
        {h.get("x-a2a-notification-token") for h, _ in mine} == {token},
        "push token",
    )
    shapes = {push_shape(json.loads(raw)) for _, raw in mine}
    expect(problems, shapes == {"0.3 task"}, f"push bodies for a 0.3 config: {shapes}")
    bad_hmac = [verify_push_hmac(hmac_secret, h, raw) for h, raw in mine]
    expect(problems, not any(bad_hmac), f"HMAC: {bad_hmac}")
    bad_jwt = [verify_push_signature(served, h, raw) for h, raw in mine]
    expect(problems, not any(bad_jwt), f"JWT: {bad_jwt}")
    forged = verify_push_hmac(hmac_secret + "x", *mine[0]) if mine else "none"
    expect(problems, forged != "", "a wrong secret verified")
    assert not problems, "\n".join(problems)
