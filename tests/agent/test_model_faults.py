"""Model API faults as a user and `teleton status` see them (issue 30, point 5): a malformed 200 is retried and
the turn answered; a budget of them ends in the apology and the model error in the status; while calls retry,
the status says since when and why; a user kept waiting past ``agent.slow_notice_s`` is told once, and the
answer follows. Both providers through their real SDKs; the notice's time moved by the test, never slept."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from teleton.agent.factory import AgentStack
from teleton.agent.stages.slow_notice import NOTICE
from teleton.config import load_config
from teleton.daemon.health import gather_status
from teleton.daemon.runner import Daemon
from teleton.daemon.status_file import describe, read_status, write_status
from teleton.gateway.contract import IncomingMessage
from teleton.memory.feed import message_life as life
from tests.agent.conftest import GROUP, OWNER, OWNER_DM, AgentHarness, archive_incoming
from tests.daemon.harness import write_config
from tests.delivery.support import Gate, answer_state
from tests.fakes.anthropic_server import Body, Reply, overloaded, raw, text
from tests.waiting import until

CUT = '{"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "content": [{"type": "te'


def retries(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "llm_retry"]


def daemon_of(h: AgentHarness) -> Daemon:
    """The daemon's status machinery (supervisor, ``gather_status``) around the harness's agent, wired as
    ``Daemon._start`` wires it."""
    daemon = Daemon(load_config(write_config(h.tmp_path, "http://127.0.0.1:9")))
    daemon.db = h.db
    daemon.stack = AgentStack(agent=h.agent, llm=h.llm, registry=h.agent.deps.registry)
    h.agent.deps.report = daemon.supervisor.report
    return daemon


async def status_text(daemon: Daemon, path: Path) -> str:
    """What `teleton status` prints, through the status file as the CLI reads it."""
    await gather_status(daemon)
    write_status(path, daemon.status)
    running, text_ = describe(read_status(path))
    assert running, text_
    return text_


# -- malformed answers ------------------------------------------------------------------------------------


async def test_a_truncated_answer_is_retried_and_the_turn_answered(any_harness: AgentHarness, logs: list[dict]) -> None:
    h = any_harness
    h.fake.queue(raw(CUT), text("Here I am."))
    assert await h.dm("are you there? please answer") == "Here I am."
    [retry] = retries(logs)
    assert retry["reason"].startswith("malformed answer: invalid JSON") and retry["body"] == CUT
    assert h.fake.pending == 0


async def test_an_answer_of_the_wrong_shape_is_retried_and_the_turn_answered(
    any_harness: AgentHarness, logs: list[dict]
) -> None:
    h = any_harness
    h.fake.queue(raw('{"foo": 1}'), text("Here I am."))
    assert await h.dm("are you there? please answer") == "Here I am."
    [retry] = retries(logs)
    assert retry["reason"].startswith("malformed answer: ") and retry["body"] == '{"foo": 1}'
    session = await h.agent.sessions.active(OWNER_DM.id)
    assert [m["role"] for m in session.messages] == ["user", "assistant"]


async def test_only_malformed_answers_end_in_the_apology_and_the_status_names_the_model_error(
    any_harness: AgentHarness,
) -> None:
    h = any_harness
    daemon = daemon_of(h)
    attempts = h.llm.settings.max_retries + 1
    h.fake.queue(*[raw(CUT) if i % 2 else raw('{"foo": 1}') for i in range(attempts)])
    msg = h.message(OWNER_DM, OWNER, "are you there? please answer")
    await archive_incoming(h.db, msg, life.STATE_ACCEPTED)
    reply = await h.agent.handle(msg)
    assert reply is not None and "can't reach my language model" in reply  # the apology, not silence
    assert h.fake.pending == 0  # the whole budget was spent on them, no more
    state, note = await answer_state(h.db, OWNER_DM.id, msg.message_id)
    assert state == life.STATE_FAILED and note is not None and "malformed answer" in note
    shown = await status_text(daemon, h.tmp_path / "status.json")
    assert re.search(rf"last model error \(\d+s ago\): .*unavailable after {attempts} attempts: malformed", shown)
    assert "model retrying" not in shown  # given up: no longer retrying


# -- the status while calls retry -------------------------------------------------------------------------


async def test_the_status_says_the_model_is_retrying_until_it_answers(any_harness: AgentHarness) -> None:
    h = any_harness
    daemon = daemon_of(h)
    gate = Gate()

    def held(body: Body) -> Reply:
        gate.hold()  # the third attempt is in flight until the test has read the status
        return text("Here I am.")

    h.fake.queue(overloaded(), overloaded())
    h.main = held
    path = h.tmp_path / "status.json"
    assert "model retrying" not in await status_text(daemon, path)
    turn = asyncio.create_task(h.dm("are you there? please answer"))
    try:
        await asyncio.to_thread(gate.entered.wait)
        shown = await status_text(daemon, path)
    finally:
        gate.open()
    assert await turn == "Here I am."
    line = re.search(r"^  model retrying since (\d\d:\d\d) \(last: (.*)\)$", shown, re.MULTILINE)
    assert line is not None, shown
    assert line.group(2).startswith("529 ") and "verloaded" in line.group(2), shown
    after = await status_text(daemon, path)
    assert "model retrying" not in after and "last model error" not in after, after


# -- the slow notice --------------------------------------------------------------------------------------


class Clock:
    """The slow notice's time, moved by the test: a ``sleep`` returns once ``advance`` has passed its end."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeping: list[tuple[float, asyncio.Future[None]]] = []
        self.asked: list[float] = []  # every wait asked for

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self.now + seconds, wake)
        self.sleeping.append(entry)
        try:
            await wake
        finally:
            self.sleeping.remove(entry)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for end, wake in self.sleeping:
            if end <= self.now and not wake.done():
                wake.set_result(None)


def slow_model(h: AgentHarness, answer: str) -> Gate:
    """The main model holds its answer until the gate opens."""
    gate = Gate()

    def held(body: Body) -> Reply:
        gate.hold()
        return text(answer)

    h.main = held
    return gate


def with_notice(h: AgentHarness, after_s: float) -> Clock:
    clock = Clock()
    h.agent.settings = replace(h.agent.settings, slow_notice_s=after_s)
    h.agent.deps.sleep = clock.sleep
    return clock


async def accepted(h: AgentHarness, text_: str) -> IncomingMessage:
    """The owner's DM message as the Telegram layer leaves it: archived and accepted, owed an answer."""
    msg = h.message(OWNER_DM, OWNER, text_)
    await archive_incoming(h.db, msg, life.STATE_ACCEPTED)
    return msg


async def test_a_late_answer_is_announced_once_at_the_threshold_and_follows_the_notice(harness: AgentHarness) -> None:
    h = harness
    clock = with_notice(h, 20)
    gate = slow_model(h, "Here is your answer.")
    msg = await accepted(h, "tell me about the weather")
    turn = asyncio.create_task(h.agent.handle_turn(msg))
    try:
        await until(lambda: clock.sleeping and gate.entered.is_set())
        clock.advance(19.9)
        await asyncio.sleep(0)
        assert clock.sleeping and h.gateway.sent == []  # not yet: the threshold has not passed
        clock.advance(0.1)
        await until(lambda: h.gateway.sent)
        assert [s.text for s in h.gateway.sent] == [NOTICE]
        # The notice is not the answer: the message is still owed one (a crash now answers it after restart).
        assert (await answer_state(h.db, OWNER_DM.id, msg.message_id))[0] == life.STATE_ACCEPTED
        clock.advance(60)  # much later still: no second notice
    finally:
        gate.open()
    done = await turn
    assert [s.text for s in h.gateway.sent] == [NOTICE, "Here is your answer."]
    assert done is not None and done.slow_notice == h.gateway.sent[0]  # kept, so the reply can follow it
    assert (await answer_state(h.db, OWNER_DM.id, msg.message_id))[0] == life.STATE_ANSWERED
    assert clock.asked == [20] and clock.sleeping == []


async def test_no_notice_when_the_answer_comes_before_the_threshold(harness: AgentHarness) -> None:
    h = harness
    clock = with_notice(h, 20)
    gate = slow_model(h, "Quick answer.")
    msg = await accepted(h, "tell me about the weather")
    turn = asyncio.create_task(h.agent.handle_turn(msg))
    try:
        await until(lambda: clock.sleeping and gate.entered.is_set())
        clock.advance(19)
    finally:
        gate.open()
    await turn
    assert [s.text for s in h.gateway.sent] == ["Quick answer."]
    assert clock.sleeping == []  # the timer ended with the answer
    clock.advance(60)
    await asyncio.sleep(0)
    assert len(h.gateway.sent) == 1


async def test_no_notice_when_it_is_off(harness: AgentHarness) -> None:
    h = harness
    clock = with_notice(h, 0)
    h.main = lambda body: text("Answer.")
    assert await h.agent.handle(await accepted(h, "tell me about the weather")) == "Answer."
    assert clock.asked == [] and [s.text for s in h.gateway.sent] == ["Answer."]


async def test_no_notice_for_a_scheduled_turn_nobody_waits_for(harness: AgentHarness) -> None:
    h = harness
    h.main = lambda body: text("ok")
    await h.group("hello everyone")  # the archive now knows the group
    clock = with_notice(h, 20)
    gate = slow_model(h, "Reminder: water the plants.")
    task = asyncio.create_task(h.agent.run_scheduled(GROUP.id, "[Scheduled task #3 is due]\nremind them"))
    try:
        await asyncio.to_thread(gate.entered.wait)
        clock.advance(60)
    finally:
        gate.open()
    assert await task == "Reminder: water the plants."
    assert clock.asked == [] and NOTICE not in [s.text for s in h.gateway.sent]
