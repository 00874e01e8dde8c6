"""The worker's slots (issue 25): what many runs share is bounded, handed out first come first
served, given up by a command past its lease, and paused for the wait a rate limit asks for.
The model's gate is tried through the real `anthropic` client against the fake Messages API."""

from __future__ import annotations

import asyncio
import time

import pytest

from a2a_agent.model.anthropic_adapter import AnthropicModel
from a2a_agent.model.gated import GatedModel
from a2a_agent.model.types import ModelRequest, user_text
from a2a_agent.slots import Slots, SlotsView, StepSlots
from tests.support.fake_anthropic import JSON, FakeAnthropic, error_reply, text_reply


async def test_no_more_than_the_size_hold_at_once_and_waiters_go_in_order() -> None:
    slots = Slots("commands", 2)
    order: list[int] = []
    most = 0
    release = asyncio.Event()

    async def hold(n: int) -> None:
        nonlocal most
        async with slots.hold():
            order.append(n)
            most = max(most, slots.view().held)
            await release.wait()

    tasks = [asyncio.create_task(hold(n)) for n in range(6)]
    await asyncio.sleep(0.05)
    assert slots.view().held == 2 and slots.view().waiting == 4
    release.set()
    await asyncio.gather(*tasks)
    assert most == 2 and order == [0, 1, 2, 3, 4, 5]
    assert slots.view() == slots.view().__class__("commands", 2, 0, 0, 0)


async def test_a_holder_past_its_lease_gives_its_slot_up_and_runs_on() -> None:
    slots = Slots("commands", 1, lease_s=0.05)
    long_done = asyncio.Event()
    finished = asyncio.Event()

    async def long() -> None:
        async with slots.hold():
            await long_done.wait()

    async def short() -> None:
        async with slots.hold():
            finished.set()

    first = asyncio.create_task(long())
    await asyncio.sleep(0.01)
    second = asyncio.create_task(short())
    await asyncio.wait_for(finished.wait(), 5)  # the long one still holds on
    assert not first.done() and slots.view().long == 1
    long_done.set()
    await asyncio.gather(first, second)
    view = slots.view()
    assert (view.held, view.long, view.waiting) == (0, 0, 0)
    # And the slot count is whole again: exactly one holder at a time.
    async with slots.hold():
        assert slots.view().held == 1


async def test_a_cancelled_waiter_leaves_its_place() -> None:
    slots = Slots("commands", 1)
    async with slots.hold():
        waiter = asyncio.create_task(slots.hold().__aenter__())
        await asyncio.sleep(0.01)
        assert slots.view().waiting == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
    assert slots.view().waiting == 0
    async with slots.hold():
        assert slots.view().held == 1


def _request(text: str) -> ModelRequest:
    return ModelRequest(system="s", messages=[user_text(text)], tools=[], max_tokens=64)


async def test_a_rate_limited_answer_holds_back_the_calls_that_start_after_it() -> None:
    """The first call is answered 429 with a wait of a second: the SDK waits and tries again,
    and a second call, started meanwhile, is not sent before that second has passed."""
    arrived: dict[str, float] = {}

    def answer(body: JSON) -> JSON:
        text = body["messages"][0]["content"][0]["text"]
        arrived.setdefault(text, time.monotonic())
        return text_reply(text)

    def limited(body: JSON) -> JSON:
        arrived["429"] = time.monotonic()
        return error_reply(429, retry_after=1.0)

    with FakeAnthropic([limited, answer, answer]) as fake:
        slots = Slots("model calls", 10)
        inner = AnthropicModel(
            api_key="sk-ant-test", base_url=fake.base_url, rate_limited=slots.pause
        )
        model = GatedModel(inner, slots)
        try:
            first = asyncio.create_task(model.complete(_request("first")))
            while fake.request_count < 1:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)  # told of the 429; the SDK now waits its second
            second = await model.complete(_request("second"))
            assert (await first).text == "first" and second.text == "second"
        finally:
            await model.close()
        assert [r.status for r in fake.records] == [429, 200, 200]
    # Without the pause it went out 0.1 s after the 429; now not before the wait it named.
    assert arrived["second"] - arrived["429"] >= 0.95


# ---- the steps' own slots -----------------------------------------------------------------


async def test_steps_beyond_the_size_wait_in_order_and_one_waiting_on_its_effect_holds_none() -> (
    None
):
    slots = StepSlots(2, lease_s=None)
    order: list[str] = []
    effect_done = asyncio.Event()
    most = 0

    async def step(name: str, *, effect: bool = False) -> None:
        nonlocal most
        async with slots.hold():
            order.append(name)
            most = max(most, slots.view().held)
            if effect:
                async with slots.aside():  # the model thinks: others step meanwhile
                    assert slots.view().held < 2
                    await effect_done.wait()
                order.append(f"{name} concluded")
            else:
                await asyncio.sleep(0.01)

    model = asyncio.create_task(step("model", effect=True))
    await asyncio.sleep(0.01)
    others = [asyncio.create_task(step(f"s{n}")) for n in range(4)]
    await asyncio.sleep(0.1)
    # While the model's step waited on its effect, the four others went through two at a
    # time; its conclusion then took a slot in line like any other.
    assert order == ["model", "s0", "s1", "s2", "s3"] and most == 2
    effect_done.set()
    await asyncio.gather(model, *others)
    assert order[-1] == "model concluded"
    assert slots.view() == SlotsView("steps", 2, 0, 0, 0)


async def test_a_slot_set_aside_by_checks_side_by_side_is_given_up_and_taken_once() -> None:
    slots = StepSlots(1, lease_s=None)
    seen: list[int] = []

    async def check(n: int) -> None:
        async with slots.aside():  # each check's command: the step's slot is free once
            seen.append(slots.view().held)
            await asyncio.sleep(0.02 * (n + 1))

    async with slots.hold():
        assert slots.view().held == 1
        await asyncio.gather(*(check(n) for n in range(3)))
        assert slots.view().held == 1  # taken again once, not once per check
    assert seen == [0, 0, 0]
    assert slots.view() == SlotsView("steps", 1, 0, 0, 0)
    async with slots.aside():  # outside a step there is nothing to set aside
        assert slots.view() == SlotsView("steps", 1, 0, 0, 0)


async def test_a_step_past_its_lease_lets_the_next_one_in_and_goes_on() -> None:
    slots = StepSlots(1, lease_s=0.05)
    entered: list[float] = []
    started = time.monotonic()

    async def step(hold_s: float) -> None:
        async with slots.hold():
            entered.append(time.monotonic() - started)
            await asyncio.sleep(hold_s)

    await asyncio.gather(step(0.5), step(0.0))
    assert entered[1] < 0.4, entered  # it did not wait for the first step's 0.5 s
    assert slots.view() == SlotsView("steps", 1, 0, 0, 0)
