"""The command-line reference of docs/cli.md, generated from the ``cycleio`` parser so the two never drift."""

from __future__ import annotations

import argparse
from pathlib import Path

START, END = "<!-- cli-reference:start -->", "<!-- cli-reference:end -->"
WIDTH = 100


def _subcommands(parser: argparse.ArgumentParser, first: tuple[str, ...]) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of a parser: those named in ``first`` in that order, then the others by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = [name for name in first if name in action.choices]
            return {name: action.choices[name] for name in [*listed, *sorted(set(action.choices) - set(listed))]}
    return {}


def _help(parser: argparse.ArgumentParser) -> str:
    """A parser's --help at a fixed width (not the terminal's), so the page is the same everywhere."""
    formatter = parser.formatter_class
    parser.formatter_class = lambda prog: argparse.HelpFormatter(prog, max_help_position=24, width=WIDTH)
    try:
        return parser.format_help().rstrip() + "\n"
    finally:
        parser.formatter_class = formatter


def _sections(parser: argparse.ArgumentParser, chain: list[str], first: tuple[str, ...]):
    for name, sub in _subcommands(parser, first).items():
        yield [*chain, name], sub
        yield from _sections(sub, [*chain, name], first)


def cli_markdown(parser: argparse.ArgumentParser, user_commands: tuple[str, ...]) -> str:
    """Every command's --help, the user's commands first (in the order --help lists them), each under its own
    heading."""
    lines = ["## cycleio", "", "```text", _help(parser).rstrip(), "```", ""]
    for chain, sub in _sections(parser, [], user_commands):
        lines += [f"## cycleio {' '.join(chain)}", "", "```text", _help(sub).rstrip(), "```", ""]
    return "\n".join(lines)


def update_page(path: Path, text: str) -> None:
    from ..fsutil import replace_between_markers

    replace_between_markers(path, START, END, text, "the command-line reference")
