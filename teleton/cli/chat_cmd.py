"""``teleton chat``: talk to the agent in the terminal, as the admin's DM, with no Telegram needed.

Same database, workspace, memory, tools and privacy rules as the daemon; the terminal is just another
implementation of the Gateway contract. Ctrl-C stops the answer being written (like /stop) and never loses
the session; Ctrl-D or /exit leaves. Input history is kept in ``<data_dir>/chat_history``, the log in
``<data_dir>/chat.log`` (or ``logging.file``); only warnings and errors reach the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from teleton.cli.context import cli_embedder
from teleton.gateway.contract import UserInfo
from teleton.gateway.terminal import TERMINAL_CHAT_ID, TerminalGateway
from teleton.observability.logging import configure_logging
from teleton.privacy import Principals

EXIT_WORDS = {"/exit", "/quit", "exit", "quit"}


def chat(
    ctx: typer.Context,
    new: Annotated[
        bool, typer.Option("--new", help="Start a fresh conversation (the last one is summarised).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="Not even warnings between the answers.")] = False,
) -> None:
    """Talk to the agent in the terminal, as your own DM (same memory and tools, no Telegram needed)."""
    from teleton.cli.context import cli_config
    from teleton.config import require_llm

    config = cli_config(ctx)
    require_llm(config)
    console = Console()
    # The conversation owns the screen: the log goes to a file, only warnings and errors to the terminal.
    log_file = config.logging.file or Path(config.storage.data_dir) / "chat.log"
    configure_logging(config.logging.level, "json", log_file, stream_level="error" if quiet else "warning")
    history = _history(Path(config.storage.data_dir) / "chat_history")
    # input() runs on the main thread (line editing, history, Ctrl-C as KeyboardInterrupt); each turn runs
    # on one long-lived event loop between prompts.
    with asyncio.Runner() as runner:
        session = runner.run(ChatSession.open(config, console))
        try:
            if new:
                runner.run(session.turn("/new"))
            while True:
                try:
                    line = input("you> ")
                except EOFError:
                    break
                except KeyboardInterrupt:
                    console.print("\n[dim](Ctrl-D or /exit to quit)[/]")
                    continue
                history()
                if line.strip().lower() in EXIT_WORDS:
                    break
                if line.strip():
                    try:
                        runner.run(session.turn(line))
                    except KeyboardInterrupt:
                        console.print("[dim](stopped)[/]")
        finally:
            runner.run(session.close())


class ChatSession:
    """The agent, its store and the terminal gateway, open for one ``teleton chat``."""

    def __init__(
        self, stack: Any, db: Any, gateway: TerminalGateway, console: Console, feed_embedder: Any = None
    ) -> None:
        self.stack = stack
        self.db = db
        self.gateway = gateway
        self.console = console
        self.feed_embedder = feed_embedder

    @classmethod
    async def open(cls, config: Any, console: Console, *, embedder: Any = None) -> ChatSession:
        from teleton.agent.factory import build_agent
        from teleton.storage import Database

        if embedder is None:
            embedder = cli_embedder(config, console)
        dims = getattr(embedder, "dims", None)
        embedding = (embedder.model_id, dims) if embedder is not None and dims else None
        db = await Database.open(config.storage.database, embedding=embedding)
        # The terminal is the owner's own chat (DESIGN §8): its clearance reads everything, as the owner's DM.
        user_id = config.telegram.owner_id or TERMINAL_CHAT_ID
        gateway = TerminalGateway(console, db=db, user=UserInfo(id=user_id, first_name="You"))
        await gateway.start()
        principals = Principals.from_telegram(config.telegram, owner_chats=[TERMINAL_CHAT_ID])
        if principals.owner_id is None:
            principals.owner_id = user_id
        stack = await build_agent(config, db=db, gateway=gateway, embedder=embedder, principals=principals)
        feed_embedder = None
        if embedder is not None and db.vectors:  # what is said here is found by meaning later, as on Telegram
            from teleton.memory.feed_embedding import FeedEmbedder

            feed_embedder = FeedEmbedder(db, embedder)
            feed_embedder.start()
            gateway.on_archived = feed_embedder.notify
        console.print(
            f"[bold]Teleton[/] — {config.agent.model}. Your DM with the agent; /help for commands, "
            "Ctrl-C stops an answer, Ctrl-D or /exit quits."
        )
        return cls(stack, db, gateway, console, feed_embedder)

    async def turn(self, line: str) -> str | None:
        """One message and its answer; Ctrl-C meanwhile stops the answer (as /stop), not the program."""
        agent = self.stack.agent
        msg = await self.gateway.incoming(line)
        loop = asyncio.get_running_loop()
        installed = False
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not on the main thread
            loop.add_signal_handler(signal.SIGINT, lambda: agent.stop(self.gateway.chat.id))
            installed = True
        try:
            with self.console.status("thinking…", spinner="dots"):
                reply = await agent.handle(msg)
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)
        if reply is None:
            self.console.print("[dim](no answer)[/]")
        return reply

    async def close(self) -> None:
        if self.feed_embedder is not None:
            await self.feed_embedder.stop(flush_s=5.0)
        await self.stack.close()
        await self.db.close()
        self.console.print("[dim]bye[/]")


def _history(path: Path) -> Callable[[], None]:
    """Load readline history; return a function that saves it (called after each line)."""
    try:
        import readline
    except ImportError:  # no readline (Windows): plain input, no history
        return lambda: None
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(1000)

    def save() -> None:
        with contextlib.suppress(OSError):
            readline.write_history_file(path)

    return save
