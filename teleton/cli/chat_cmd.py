"""``teleton chat``: talk to the agent in the terminal, as the admin's DM, with no Telegram needed.

Same database, workspace, memory, tools and privacy rules as the daemon; the terminal is just another
implementation of the Gateway contract. Ctrl-C stops the answer being written (like /stop) and never loses
the session; Ctrl-D or /exit leaves. ``/attach PATH [caption]`` sends a photo, voice note or document as
Telegram would. Input history is kept in ``<data_dir>/chat_history``, the log in
``<data_dir>/chat.log`` (or ``logging.file``); only errors reach the terminal (retries show in the spinner).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections import deque
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import structlog
import typer
from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.markup import escape

from teleton.cli.chat_screen import ChatScreen
from teleton.cli.context import cli_embedder, running_config
from teleton.cli.terminal_gateway import OWNER_NAME, TERMINAL_CHAT_ID, TerminalGateway
from teleton.config import require_llm
from teleton.config.schema import Config
from teleton.daemon.database_watch import DatabaseWatch, LostDatabase, leave_marker, tell_last_loss
from teleton.daemon.health import StartupError
from teleton.gateway.contract import Thread, UserInfo
from teleton.llm.connect import client_for
from teleton.llm.progress import WATCHING
from teleton.memory.embeddings.provider import EmbeddingProvider
from teleton.privacy import Principals
from teleton.process.lifecycle import Lifecycle
from teleton.process.logging import configure_logging
from teleton.storage import Database, in_use
from teleton.storage.in_use import InUse
from teleton.storage.private_files import private_data_dir, touch_private
from teleton.storage.workspace_template import create_workspace

if TYPE_CHECKING:  # types only: both load when a chat starts (below)
    from teleton.agent.factory import AgentStack
    from teleton.tools.mcp.servers import McpServers

log = structlog.get_logger(__name__)
INTERACTIVE_RETRIES = 2
EXIT_WORDS = {"/exit", "/quit", "exit", "quit"}
EXIT_DATABASE_LOST = 78  # the daemon's code for a stop no restart fixes
CLOSE_TIMEOUT_S = 10.0  # each part's stop at the end of a chat (the feed's embedder flushes for 5 s)


class DatabaseGone(Exception):
    def __init__(self, lost: LostDatabase) -> None:
        super().__init__(lost.line())
        self.lost = lost


def chat(
    ctx: typer.Context,
    new: Annotated[
        bool, typer.Option("--new", help="Start a fresh conversation (the last one is summarised).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No errors on screen either (they stay in the log).")] = False,
) -> None:
    """Talk to the agent in the terminal, as your own DM (same memory and tools, no Telegram needed)."""
    config = running_config(ctx)
    require_llm(config)
    console = Console()
    # The conversation owns the screen: the log goes to a file, only errors to the terminal (a retry is a
    # warning: the spinner counts it).
    log_file = config.logging.file or Path(config.storage.data_dir) / "chat.log"
    configure_logging(
        config.logging.level,
        "human",
        log_file,
        stream_level="critical" if quiet else "error",
        max_file_mb=config.logging.max_file_mb,
        backup_count=config.logging.backup_count,
    )
    private_data_dir(config.storage.data_dir)
    converse = _converse if sys.stdin.isatty() and sys.stdout.isatty() else _converse_plain
    try:
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C between answers without a live prompt: leave
            asyncio.run(converse(config, console, new))
    except DatabaseGone as exc:  # as the daemon: one line, exit 78, a marker the next start and doctor read
        print(exc.lost.line(), file=sys.stderr)
        raise typer.Exit(EXIT_DATABASE_LOST) from None
    except (InUse, StartupError) as exc:  # another command holds the data, or the database cannot be opened
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None


async def _converse_plain(config: Config, console: Console, new: bool) -> None:
    """Input from a pipe or a file: each line is a message, answered before the next is read."""
    session = await ChatSession.open(config, console)
    try:
        if new:
            await session.turn("/new")
        while line := await asyncio.to_thread(sys.stdin.readline):
            if line.strip().lower() in EXIT_WORDS:
                break
            if line.strip():
                await session.ensure_database()
                await session.turn(line.rstrip("\n"))
    finally:
        await session.close()


async def _converse(config: Config, console: Console, new: bool) -> None:
    """A terminal: a live prompt, answers streaming above it, bracketed paste as one message."""
    # Everything typed (pastes included): 0600 before prompt_toolkit opens it with the umask's mode.
    history = touch_private(config.storage.chat_history_file)
    prompt: PromptSession[str] = PromptSession(history=FileHistory(str(history)))

    def redraw() -> None:
        if prompt.app.is_running:
            prompt.app.invalidate()

    def write(text: str) -> None:
        console.file.write(text)  # under patch_stdout: above the prompt
        console.file.flush()

    screen = ChatScreen(write, redraw)
    # patch_stdout: whatever is printed while the prompt is live goes above it, not through it.
    with patch_stdout(raw=True):
        session = await ChatSession.open(config, console, screen=screen)
        repl = Repl(session)
        try:
            if new:
                repl.submit("/new")
            while True:
                try:
                    line = await prompt.prompt_async(screen.prompt, refresh_interval=0.1)
                except EOFError:
                    break
                except KeyboardInterrupt:  # Ctrl-C stops the answer being written, like /stop
                    if not repl.stop():
                        console.print("[dim](Ctrl-D or /exit to quit)[/]")
                    continue
                word = line.strip().lower()
                if word in EXIT_WORDS:
                    break
                if word == "/stop" and repl.stop():
                    continue
                if line.strip():
                    await session.ensure_database()
                    repl.submit(line)
        finally:
            await repl.close()
            await session.close()


def interactive_llm(config: Config) -> Any:
    """The model client for someone waiting at the terminal: a dead API is said after seconds, not minutes
    (the daemon keeps retrying far longer, as nobody is watching it)."""
    return client_for(
        config.agent,
        max_retries=min(config.agent.max_retries, INTERACTIVE_RETRIES),
        retry_max_delay_s=min(config.agent.retry_max_delay_s, 4.0),
        connect_timeout_s=5.0,
    )


async def terminal_user(db: Database, user_id: int) -> UserInfo:
    """The person at the terminal is the owner: their Telegram name when the archive has it, else "Owner"."""
    from teleton.agent.deps import load_owner  # deferred, as the agent

    owner = await load_owner(db, user_id)
    if owner is None or owner.display_name == str(owner.id):
        return UserInfo(id=user_id, first_name=OWNER_NAME)
    return owner


class Repl:
    """Lines typed while an answer is being written wait their turn; /stop and Ctrl-C end that answer."""

    def __init__(self, session: ChatSession) -> None:
        self.session = session
        self.waiting: deque[str] = deque()
        self.task: asyncio.Task[str | None] | None = None

    def submit(self, line: str) -> None:
        if self.task is not None:
            self.session.console.print("[dim](after this answer)[/]")
        self.waiting.append(line)
        self._next()

    def stop(self) -> bool:
        if self.task is None:
            return False
        self.session.stop()
        return True

    def _next(self, done: asyncio.Task[str | None] | None = None) -> None:
        if done is not None:
            self.task = None
            if not done.cancelled() and done.exception() is not None:  # a bug: one line, the chat goes on
                error = done.exception()
                log.error("chat_turn_failed", error=repr(error), exc_info=error)
                self.session.console.print(f"[red]That message failed: {error}[/] (details in the log)")
        if self.task is None and self.waiting:
            self.task = asyncio.create_task(self.session.turn(self.waiting.popleft()))
            self.task.add_done_callback(self._next)

    async def close(self) -> None:
        self.waiting.clear()
        if self.task is not None:
            self.session.stop()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


@dataclass
class ChatSession:
    """The agent, its store and the terminal gateway, open for one ``teleton chat``; ``life`` stops them."""

    life: Lifecycle
    stack: AgentStack
    db: Database
    gateway: TerminalGateway
    console: Console
    screen: ChatScreen | None = None
    watch: DatabaseWatch | None = None
    data_dir: Path | None = None
    mcp: McpServers | None = None
    stopped: bool = False

    @classmethod
    async def open(
        cls,
        config: Config,
        console: Console,
        *,
        embedder: EmbeddingProvider | None = None,
        screen: ChatScreen | None = None,
    ) -> ChatSession:
        life = Lifecycle(stop_timeout_s=CLOSE_TIMEOUT_S)
        try:
            return await cls._open(life, config, console, embedder, screen)
        except BaseException:
            await life.stop()  # what started before the failure, in reverse
            raise

    @classmethod
    async def _open(
        cls,
        life: Lifecycle,
        config: Config,
        console: Console,
        embedder: EmbeddingProvider | None,
        screen: ChatScreen | None,
    ) -> ChatSession:
        # Deferred: the agent, its tools and SDKs load when a chat starts.
        from teleton.daemon.services import open_agent, open_store, start_feed_embedder, start_outside_servers

        data_dir = config.storage.data_dir
        using = await asyncio.to_thread(in_use.hold, data_dir)  # shared with the daemon; `teleton restore` waits
        life.on_stop("data directory", partial(asyncio.to_thread, in_use.release, using))

        async def notice(text: str) -> None:  # the last run stopped on a lost database: said once, as the daemon does
            console.print(f"[yellow]{escape(text)}[/]")

        await tell_last_loss(data_dir, notice)
        await asyncio.to_thread(create_workspace, config.storage.workspace_dir)  # as the daemon does at start
        if embedder is None:
            embedder = cli_embedder(config, Console(stderr=True))  # a warning: stdout is the conversation
        store = await open_store(life, config, embedder, check=False)
        db = store.db
        # What is said here is found by meaning later, as on Telegram.
        feed = start_feed_embedder(life, store, batch=config.embedding.batch_size, flush_s=5.0)
        # The terminal is the owner's own chat (docs/privacy.md): its clearance reads everything, as the owner's DM.
        user_id = config.telegram.owner_id or TERMINAL_CHAT_ID
        gateway = TerminalGateway(
            console, db=db, user=await terminal_user(db, user_id), on_archived=feed.notify if feed else None
        )
        if screen is not None:
            gateway.streamed = screen.shown
        await gateway.start()
        principals = Principals.from_telegram(config.telegram, owner_chats=[TERMINAL_CHAT_ID])
        if principals.owner_id is None:
            principals.owner_id = user_id
        stack = await open_agent(
            life, config, store, gateway, principals=principals, llm=interactive_llm(config), surface="terminal"
        )
        console.print(
            f"[bold]Teleton[/] — {config.agent.model}. Your DM with the agent; /help for commands, "
            "Ctrl-C stops an answer, Ctrl-D or /exit quits."
        )

        async def tell(text: str) -> None:  # an MCP server's notices: this terminal is the owner's DM
            console.print(escape(text), style="dim")

        mcp = start_outside_servers(life, config, stack, db, tell)  # in the background: tools join as they connect
        watch = await DatabaseWatch.opened(db.path, by="`teleton chat`")
        return cls(life, stack, db, gateway, console, screen, watch, data_dir, mcp)

    async def turn(self, line: str) -> str | None:
        """One message and its answer; Ctrl-C meanwhile stops the answer (as /stop), not the program."""
        text, attachment = attachment_of(line)
        if attachment is not None and not await asyncio.to_thread(attachment.is_file):
            self.console.print(f"[red]no such file:[/] {attachment}")
            return None
        msg = await self.gateway.incoming(text, attachment)
        self.stopped = False
        loop = asyncio.get_running_loop()
        installed = False
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not on the main thread
            loop.add_signal_handler(signal.SIGINT, self.stop)  # without a live prompt, Ctrl-C is a signal
            installed = True
        token = WATCHING.set(self.screen.started()) if self.screen is not None else None
        try:
            reply = await self.stack.agent.handle(msg)
        finally:
            if token is not None:
                WATCHING.reset(token)
            if self.screen is not None:
                self.screen.finished()
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
        if reply is None:
            self.console.print("[dim](stopped)[/]" if self.stopped else "[dim](no answer)[/]")
        return reply

    async def ensure_database(self) -> None:
        """Before a message is archived: the database file is still the one opened, or DatabaseGone (the
        marker left for the next start), so no turn is answered into a file no one will read."""
        lost = await self.watch.check() if self.watch is not None else None
        if lost is None or self.data_dir is None:
            return
        log.warning("database_lost", path=lost.path, how=lost.how)  # the log file; the terminal gets one line
        await leave_marker(self.data_dir, lost)
        raise DatabaseGone(lost)

    def stop(self) -> None:
        self.stopped = self.stack.agent.stop(Thread(self.gateway.chat.id)) or self.stopped

    async def close(self) -> None:
        await self.life.stop()  # the servers, the feed's embedder, the agent, the database: the reverse of open
        self.console.print("[dim]bye[/]")


def attachment_of(line: str) -> tuple[str, Path | None]:
    """``/attach PATH [caption]`` -> (caption, path); any other line -> (line, None)."""
    if not line.startswith("/attach "):
        return line, None
    rest = line[len("/attach ") :].strip()
    path, _, caption = rest.partition(" ")
    return caption.strip(), Path(path).expanduser()
