"""Help pages written the conventional way: ``teleton memory search [OPTIONS] QUERY``, ``--limit -n INTEGER``,
a flag with nothing after it.

Typer (0.2x) renders every parameter's Python type as a placeholder (``--json <bool>``, ``--limit <int range>``)
and a required argument as ``{query}``; its parameters have no hook for that, so the commands of ``teleton``
swap their parameters for the subclasses below as they are listed (``get_params``), which only changes how
they are shown.
"""

from __future__ import annotations

from typing import Any

import typer
from typer import _click
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

# typer's type labels -> the names click users know; anything else is upper-cased as it is.
TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "int range": "INTEGER", "float": "FLOAT", "float range": "FLOAT"}


def type_name(param: TyperArgument | TyperOption, ctx: _click.Context) -> str:
    label = param.display_type(ctx).removeprefix("<").removesuffix(">")
    if label.startswith("list[") and label.endswith("]"):  # a repeatable option: one value per use
        label = label[len("list[") : -1]
    if "|" in label:  # a choice
        return f"[{label}]"
    return TYPE_NAMES.get(label, label.upper())


class PlainOption(TyperOption):
    def display_type_rich(self, ctx: _click.Context) -> str | None:
        if self.is_flag or self.count:
            return None
        return self.metavar or type_name(self, ctx)


class PlainArgument(TyperArgument):
    @property
    def display_name_raw(self) -> str:
        return (self.metavar or self.name or "").upper()

    def display_type_rich(self, ctx: _click.Context) -> str | None:
        return type_name(self, ctx)

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name + ("..." if self.nargs != 1 else "")


def _plain(params: list[_click.core.Parameter]) -> list[_click.core.Parameter]:
    for param in params:
        # Same object, same state: only the display methods differ (the subclasses add no attributes).
        if type(param) is TyperOption:
            param.__class__ = PlainOption
        elif type(param) is TyperArgument:
            param.__class__ = PlainArgument
    return params


class PlainCommand(TyperCommand):
    def get_params(self, ctx: _click.Context) -> list[_click.core.Parameter]:
        return _plain(super().get_params(ctx))


class PlainGroup(TyperGroup):
    def get_params(self, ctx: _click.Context) -> list[_click.core.Parameter]:
        return _plain(super().get_params(ctx))


class App(typer.Typer):
    """A Typer whose commands and sub-groups render their help the conventional way."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", PlainGroup)
        super().__init__(**kwargs)

    def command(self, name: str | None = None, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", PlainCommand)
        return super().command(name, **kwargs)
