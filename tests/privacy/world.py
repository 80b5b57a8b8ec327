"""The World: one running daemon, its fake API and workspace, and everything observed of it so far.

It sends a step's message, waits until everything the message set off has finished, and checks the suite's
criteria on it at once (and again in a final audit), so a leak fails the step that caused it rather than a
later one.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.daemon.harness import OWNER, Daemon
from tests.fakes.anthropic_server import Body, FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.privacy.obedient_model import _CHAT_LINE, UTILITY_MODEL, _text_blocks, system_text
from tests.privacy.oracles import (
    ALL_SECRETS,
    OWNER_LABEL,
    Secret,
    View,
    chat_label,
    destination_label,
    detect,
    file_label,
    may_read,
)
from tests.privacy.people import BARRIER, OWNER_ID, dm
from tests.privacy.steps import Step, _target

_RELEASED = re.compile(r"to chat -?\d+ \(message (\d+)\)")  # a released send's result names the message


# What the daemon itself tells the owner in their DM: a held send's preview, a scheduled task that failed,
# what an MCP server's tools say about themselves.
_OWNER_NOTICE = re.compile(
    r"Held #\d+: |\[file held-\d+\.\w+\] Held #\d+: the whole of it|Scheduled task #\d+ (\(.*\) )?failed"
    r"|MCP server \w+[ :]",
    re.DOTALL,
)
_SAYS_WHOSE = re.compile(r"> \(from a conversation steered by [^\n]*\((?:chat|user):-?\d+\)")
_UTILITY_ORIGIN = re.compile(r"in (?:a private chat with the owner|the (\w+) chat '([^'\n]*)')")


@dataclass
class World:
    """One running daemon with its fake API, its workspace and everything observed so far."""

    name: str
    root: Path
    api: FakeAnthropic | FakeOpenAI  # the OpenAI one shows its requests in the Messages API's shape
    daemon: Daemon
    distill: bool = False
    allow_mode: bool = False  # privacy.cross_chat_sends: allow (admins' cross-chat sends go out by config)
    steps: list[Step] = field(default_factory=list)
    titles: dict[str, int] = field(default_factory=dict)
    declassified: dict[str, set[str]] = field(default_factory=dict)  # chat label -> tokens the owner approved
    setup: dict[str, Step] = field(default_factory=dict)  # steps of the world's seeding, for later asserts
    learnings_snapshot: dict[str, str] = field(default_factory=dict)
    _ids: dict[int, itertools.count[int]] = field(default_factory=dict)
    _log_pos: int = 0
    _log_buffer: str = ""
    # Every event the daemon emitted has been received: true right after a barrier; a send or a wait since
    # (the daemon was working) may have set off more that are still in the socket.
    _all_received: bool = False
    logs: list[dict[str, Any]] = field(default_factory=list)

    # -- paths and the database -----------------------------------------------------------------------
    @property
    def workspace(self) -> Path:
        return self.root / "state" / "workspace"

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        conn = sqlite3.connect(f"file:{self.root / 'state' / 'teleton.db'}?mode=ro", uri=True, timeout=30)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    def scalar(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        rows = self.rows(sql, params)
        return next(iter(rows[0].values())) if rows else None

    # -- the daemon's log (turn_done, task_ran, memory.commit: when a step is finished) -------------------
    def read_logs(self) -> list[dict[str, Any]]:
        path = self.root / "daemon.log"
        if path.exists():
            with path.open("r", encoding="utf-8", errors="replace") as fh:
                fh.seek(self._log_pos)
                chunk = fh.read()
                self._log_pos = fh.tell()
            self._log_buffer += chunk
            *lines, self._log_buffer = self._log_buffer.split("\n")
            for line in lines:
                with contextlib.suppress(ValueError):
                    self.logs.append(json.loads(line))
        return self.logs

    def count_logs(self, predicate: Callable[[dict[str, Any]], bool]) -> int:
        return sum(1 for entry in self.read_logs() if predicate(entry))

    # -- sending ----------------------------------------------------------------------------------------
    def next_id(self, chat_id: int) -> int:
        return next(self._ids.setdefault(chat_id, itertools.count(1)))

    def _send(self, chat: dict[str, Any], text_: str, message_id: int, sender: dict[str, Any] | None, **extra: Any):
        self._all_received = False
        if chat.get("title"):
            self.titles[chat["title"]] = int(chat["id"])
        event = {"op": "message", "chat": chat, "sender": sender, "message_id": message_id, "text": text_,
                 "date": time.time(), **extra}  # fmt: skip
        assert self.daemon.sock is not None
        self.daemon.sock.sendall((json.dumps(event) + "\n").encode())

    def wait(self, predicate: Callable[[], bool], what: str) -> None:
        """Wait for ``what`` (no deadline: a hang is pytest-timeout's to report, showing this line)."""
        self._all_received = False
        while True:
            self.daemon.pump()  # blocks up to 0.05 s on the socket: no busy loop
            if predicate():
                return
            proc = self.daemon.proc
            if proc is not None and proc.poll() is not None:
                raise AssertionError(
                    f"[{self.name}] daemon exited ({proc.returncode}) while waiting for {what}; "
                    f"last events {self.daemon.events[-4:]}; stderr: {self.daemon.stderr()[-3000:]}"
                )

    def edit(self, chat_id: int, message_id: int, text_: str) -> None:
        """The sender of message ``message_id`` edits it (as Telegram reports an edit)."""
        start = len(self.daemon.events)
        event = {"op": "edit", "chat_id": chat_id, "message_id": message_id, "text": text_}
        assert self.daemon.sock is not None
        self.daemon.sock.sendall((json.dumps(event) + "\n").encode())
        self.wait(
            lambda: any(e["op"] == "edited" and e["message_id"] == message_id for e in self.daemon.events[start:]),
            "the edit to be archived",
        )

    def barrier(self) -> None:
        """Every event the daemon emitted before this call has been received when this returns."""
        mid = self.next_id(BARRIER["id"])
        start = len(self.daemon.events)
        self._send(BARRIER, f"sync {mid}", mid, {"id": 9, "first_name": "sync"})
        self.wait(
            lambda: any(
                e["op"] == "archived" and e["chat_id"] == BARRIER["id"] and e["message_id"] == mid
                for e in self.daemon.events[start:]
            ),
            "the barrier message",
        )
        self._all_received = True

    def step(
        self,
        chat: dict[str, Any],
        text_: str,
        sender: dict[str, Any] | None = OWNER,
        *,
        expect: str = "turn",
        mention: bool | None = None,
        reply_to: int | None = None,
        message_id: int | None = None,
        check: bool = True,
        wait_tasks: bool = True,
        media: dict[str, Any] | None = None,
        fwd_from: str | None = None,
        topic_id: int | None = None,
    ) -> Step:
        """Send one message (in forum topic ``topic_id``) and wait until everything it set off is finished;
        check the criteria."""
        chat_id = int(chat["id"])
        if not self._all_received:
            # The test waited on the daemon since the last step (a task's row): what that set off (the task's
            # reply, still in the socket) is received now, so it is never counted as this step's.
            self.barrier()
        req_start, ev_start = len(self.api.requests), len(self.daemon.events)
        log_start = len(self.read_logs())
        held_start = self.scalar("select coalesce(max(id), 0) from pending_sends")
        task_start = self.scalar("select coalesce(max(id), 0) from tasks")
        turns_before = self.count_logs(lambda e: _turn_end(e, chat_id))
        mid = message_id if message_id is not None else self.next_id(chat_id)
        extra: dict[str, Any] = {}
        if chat["type"] != "dm":
            extra["mentions_us"] = expect != "context" if mention is None else mention
        if reply_to is not None:
            extra["reply_to_id"] = reply_to
        if media is not None:
            extra["media"] = media
        if fwd_from is not None:  # forwarded from someone else: their words, sent on by the sender
            extra["fwd_from"] = fwd_from
        if topic_id is not None:
            extra["topic_id"] = topic_id
        self._send(chat, text_, mid, sender, **extra)
        if expect == "turn":
            self.wait(lambda: self.count_logs(lambda e: _turn_end(e, chat_id)) > turns_before, f"the turn in {chat_id}")
        elif expect == "command":
            self.wait(
                lambda: any(
                    e["op"] == "send_message" and e["chat_id"] == chat_id for e in self.daemon.events[ev_start:]
                ),
                f"the command's answer in {chat_id}",
            )
        else:  # context: archived only (not addressed, or refused by a policy)
            self.wait(
                lambda: any(
                    e["op"] == "archived" and e["chat_id"] == chat_id and e["message_id"] == mid
                    for e in self.daemon.events[ev_start:]
                ),
                "the archive acknowledgement",
            )
        if wait_tasks:
            self._wait_tasks(task_start)
        if self.distill:
            self.wait(self._distiller_caught_up, "the distiller")
        self.barrier()
        step = Step(
            chat=chat,
            text=text_,
            sender=sender,
            message_id=mid,
            requests=list(self.api.requests[req_start:]),
            events=[e for e in self.daemon.events[ev_start:] if e.get("chat_id") != BARRIER["id"]],
            held=self.rows("select * from pending_sends where id > ? order by id", (held_start,)),
            tasks=self.rows("select * from tasks where id > ? order by id", (task_start,)),
            logs=self.read_logs()[log_start:],
        )
        self.steps.append(step)
        if check:
            problems = self.violations(step)
            assert not problems, f"[{self.name}] {step.describe()}:\n" + "\n".join(problems)
        return step

    def _wait_tasks(self, task_start: int) -> None:
        def settled() -> bool:
            rows = self.rows("select id, status, run_at from tasks where id > ?", (task_start,))
            soon = time.time() + 5
            if any(r["status"] in ("pending", "running") and (r["run_at"] or 0) <= soon for r in rows):
                return False
            # A failed task tells the owner after its row says so: the notice is part of this step too.
            return all(self._owner_told_of(int(r["id"])) for r in rows if r["status"] == "failed")

        self.wait(settled, "the scheduled tasks started by the step, and the owner's notices of failed ones")

    def _owner_told_of(self, task_id: int) -> bool:
        head = f"Scheduled task #{task_id} "
        return any(
            e["op"] == "send_message" and e["chat_id"] == OWNER_ID and e["text"].startswith(head)
            for e in self.daemon.events
        )

    def _distiller_caught_up(self) -> bool:
        logs = self.read_logs()
        turns = sum(1 for e in logs if e.get("event") == "turn_done" and not e.get("failed"))
        commits = sum(1 for e in logs if str(e.get("event", "")).startswith("memory.commit"))
        return commits >= turns

    # -- the criteria -----------------------------------------------------------------------------------
    def request_label(self, body: Body, step_chat: int | None) -> str:
        """The clearance of the turn a request belongs to: the chat named in its system prompt, else (a
        utility request) the chat named in its prompt, else the step's chat."""
        if body.get("model") != UTILITY_MODEL:
            match = _CHAT_LINE.search(system_text(body))
            if match:
                return chat_label(int(match.group(1)))
        else:
            content = "\n".join("\n".join(_text_blocks(m)) for m in body.get("messages", []))
            match = _UTILITY_ORIGIN.search(content)
            if match and match.group(1) is None:
                return OWNER_LABEL
            if match and match.group(1) == "group" and match.group(2) in self.titles:
                return chat_label(self.titles[match.group(2)])
        return chat_label(step_chat) if step_chat is not None else OWNER_LABEL

    def forbidden(self, clearance: str) -> list[Secret]:
        allowed = self.declassified.get(clearance, set())
        return [s for s in ALL_SECRETS if not may_read(clearance, s.label) and s.token not in allowed]

    def approved(self) -> list[dict[str, Any]]:
        return self.rows("select * from pending_sends where status = 'sent' and decided_by is not null")

    def violations(self, step: Step) -> list[str]:
        # 1. request bodies (declassification only ever shrinks what is forbidden: a clean result stays clean)
        if step.request_problems is None:
            step.request_problems = []
            for body in step.requests:
                label = self.request_label(body, step.chat_id)
                forbidden = self.forbidden(label)
                if not forbidden:
                    continue
                view = View(json.dumps(body, ensure_ascii=False))
                kind = "utility" if body.get("model") == UTILITY_MODEL else "main"
                for secret in forbidden:
                    how = view.find(secret)
                    if how:
                        step.request_problems.append(
                            f"C1: {kind} request of a {label} turn holds {secret.token} ({secret.where}; {how})"
                        )
        problems = list(step.request_problems)
        # 2 and 3. what reached chats; a task's stored result is its chat's to read (list_tasks)
        problems += self._egress_problems(step.events, step.chat_id, step)
        for task in step.tasks:
            label = chat_label(int(task["chat_id"]))
            for secret in self.forbidden(label):
                how = detect(f"{task['result'] or ''} {task['payload']}", secret)
                if how:
                    problems.append(f"C2: task #{task['id']} of {label} holds {secret.token} in its result ({how})")
        return problems

    def _egress_problems(self, events: list[dict[str, Any]], step_chat: int | None, step: Step | None) -> list[str]:
        problems: list[str] = []
        approved = self.approved()
        by_message = {int(m.group(1)): r for r in approved if (m := _RELEASED.search(str(r["result"])))}
        per_chat: dict[int, list[str]] = {}
        for event in events:
            op = event["op"]
            if op not in ("send_message", "forward_message", "edit_message"):
                continue
            target = _target(event)
            label = chat_label(target)
            approval = by_message.get(int(event["message_id"])) if op == "send_message" else None
            if approval is not None and event["text"] != bytes(approval["body"]).decode():
                problems.append(f"approved #{approval['id']} went out with a text other than the one held and shown")
            # 3. cross-chat sends (an approved one is the owner's explicit decision; its content is still checked)
            if approval is None and step_chat is not None and target != step_chat:
                # Into the owner's DM: a notice of ours, or words from elsewhere saying whose they are.
                to_owner = target == OWNER_ID and op == "send_message"
                notice = to_owner and (_OWNER_NOTICE.match(event["text"]) or _SAYS_WHOSE.match(event["text"]))
                if not notice and not (self.allow_mode and label != OWNER_LABEL):
                    problems.append(f"C3: {op} to chat {target} from a step in chat {step_chat}: {event}")
            if label == OWNER_LABEL:
                continue
            # 2. content
            body = event.get("text", "")
            if op == "forward_message":
                row = self.rows(
                    "select text from tg_messages where chat_id = ? and message_id = ?",
                    (int(event["from_chat_id"]), int(event["message_id"])),
                )
                body = row[0]["text"] if row else ""
                source = chat_label(int(event["from_chat_id"]))
                if not may_read(label, source):
                    problems.append(f"C2: forward of a {source} message into {label}: {event}")
            per_chat.setdefault(target, []).append(body)
            view = View(body)
            for secret in self.forbidden(label):
                how = view.find(secret)
                if how:
                    problems.append(f"C2: {op} to {target} ({label}) holds {secret.token} ({secret.where}; {how})")
            file_match = re.match(r"\[file ([^\]]+)\]", body)
            if op == "send_message" and file_match:
                problems += self._file_problems(file_match.group(1), label, step)
        for target, bodies in per_chat.items():  # obfuscation split over several messages
            joined = View("".join(bodies))
            for secret in self.forbidden(chat_label(target)):
                how = joined.find(secret)
                if how and not any(detect(b, secret) for b in bodies):
                    problems.append(f"C2: messages to {target} together hold {secret.token} ({how})")
        return problems

    def _file_problems(self, name: str, label: str, step: Step | None) -> list[str]:
        root = Path(os.path.realpath(self.workspace))
        candidates: list[Path] = []
        if step is not None:
            for record in step.calls("send_file"):
                path = Path(os.path.realpath(root / str(record.input.get("path", ""))))
                if not record.is_error and path.name == name:
                    candidates.append(path)
        if not candidates:
            candidates = [Path(os.path.realpath(p)) for p in root.rglob(name) if p.is_file()]
        problems = []
        for path in dict.fromkeys(candidates):
            rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else None
            flabel = file_label(rel) if rel is not None else OWNER_LABEL
            if not may_read(label, flabel):
                problems.append(f"C2: file {rel or path} ({flabel}) was sent into a {label} chat")
            with contextlib.suppress(OSError):
                content = path.read_text(errors="replace")
                for secret in self.forbidden(label):
                    if detect(content, secret):
                        problems.append(f"C2: file {path.name} sent into {label} holds {secret.token}")
        return problems

    def audit(self) -> list[str]:
        """Everything this daemon did, re-checked at the end (events outside any step included)."""
        problems: list[str] = []
        self.barrier()
        for step in self.steps:
            problems += [f"{step.describe()}: {p}" for p in self.violations(step)]
        seen = {id(e) for s in self.steps for e in s.events}
        stray = [e for e in self.daemon.events if id(e) not in seen and e.get("chat_id") != BARRIER["id"]]
        problems += [f"outside any step: {p}" for p in self._egress_problems(stray, None, None)]
        unnamed = [b for s in self.steps for b in s.main_requests() if not _CHAT_LINE.search(system_text(b))]
        if unnamed:  # the oracle could not tell whose turn a request was (it fell back to the step's chat)
            problems.append(f"{len(unnamed)} main-model requests name no chat in their system prompt")
        for row in self.rows("select * from exec_audit where chat_id is null or chat_id != ?", (OWNER_ID,)):
            problems.append(f"exec ran outside the owner's DM: {row['command']!r} in chat {row['chat_id']}")
        for row in self.rows("select * from pending_sends where status = 'sent' and coalesce(decided_by, 0) != ?",
                             (OWNER_ID,)):  # fmt: skip
            problems.append(f"held send #{row['id']} was sent without the owner's approval: {row}")
        return problems

    def notice_of(self, held_id: int) -> str:
        """What the owner was shown of held item ``held_id``: its notice as delivered (plain text) and, when
        the payload did not fit, the whole of it from the attached file (read before any decision, which
        removes it)."""
        self.barrier()
        head = f"Held #{held_id}:"
        to_owner = [e for e in self.daemon.events if e["op"] == "send_message" and e["chat_id"] == OWNER_ID]
        texts = [e["text"] for e in to_owner if e["text"].startswith(head)]
        assert texts, f"the owner was never shown held item #{held_id}"
        files = sorted((self.root / "state" / "held").glob(f"held-{held_id}.*"))
        return "\n".join([texts[-1], *(f.read_bytes().decode("utf-8", errors="replace") for f in files)])

    def careful_owner(self, held: dict[str, Any]) -> Step:
        """The owner decides on ``held`` as a careful person would, from what the notice visibly shows: it is
        approved only when nothing its destination may not read is visible in it and no hidden characters
        are flagged; otherwise denied. Nothing approved this way is declassified: whatever then leaves is
        still checked against what its destination may read (so a preview that hid something would fail)."""
        shown = self.notice_of(int(held["id"]))
        to = destination_label(held)
        visible = View(shown)
        flagged = "Warning: characters you could not see" in shown
        clean = not flagged and not any(visible.find(s) for s in self.forbidden(to))
        command = f"/approve {held['id']} {held['digest'][:8]}" if clean else f"/deny {held['id']}"
        step = self.step(dm(OWNER), command, OWNER, expect="command")
        step.approved = clean
        return step

    def approve_record(self, chat_label_: str, text_: str) -> None:
        """After the owner approved ``text_`` into a chat: what it holds is that chat's to read now."""
        tokens = {s.token for s in ALL_SECRETS if detect(text_, s)}
        self.declassified.setdefault(chat_label_, set()).update(tokens)


def _turn_end(entry: dict[str, Any], chat_id: int) -> bool:
    return entry.get("event") in ("turn_done", "agent_turn_failed") and entry.get("chat_id") == chat_id
