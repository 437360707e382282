"""`cycleio --help`: the commands a person runs first, one line each; the rules' own named apart as internal, and
every subcommand the rules call still there under its name."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
from unittest import mock

import pytest

from conftest import REPO
from cycleio.cli import INTERNAL_NOTE, USER_COMMANDS


def cycleio(*args: str) -> subprocess.CompletedProcess:
    """``python -m cycleio ARGS`` run in this process, from the repository, 100 columns wide (each --help as its own
    Python would print it, without the seconds a second Python spends importing)."""
    from cycleio.cli import main

    out, err = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {"COLUMNS": "100"}), contextlib.chdir(REPO), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
    return subprocess.CompletedProcess(["cycleio", *args], code, out.getvalue(), err.getvalue())


def rules_commands() -> set[str]:
    """The subcommands the Snakefile and rules/*.smk run as `python -m cycleio [--log LOG] NAME`."""
    names = set()
    for path in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        names |= set(re.findall(r"python -m cycleio (?:--log \S+ )?([a-z][a-z-]*)", path.read_text()))
    return names


@pytest.fixture(scope="module")
def top_help() -> str:
    result = cycleio("--help")
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_help_lists_the_users_commands_first_each_with_its_line(top_help):
    commands, _, internal = top_help.partition("internal commands the workflow's rules run")
    assert internal, "the help names no internal commands"
    # each user command on its own line, followed by its help (on the line or the next), in USER_COMMANDS' order
    listed = re.findall(r"^    ([a-z][a-z-]*)(?:\s+|\n\s+)(\S.*)$", commands, flags=re.M)
    assert [name for name, _ in listed] == list(USER_COMMANDS)
    assert all(len(line) > 15 for _, line in listed), listed
    for name in ("check-config", "inventory", "plan", "compare", "verify", "unlock-stale"):  # the list
        assert name in USER_COMMANDS
    # the usage line names no command: COMMAND stands for them
    assert top_help.splitlines()[0] == "usage: cycleio [-h] [--log LOG] COMMAND ..."
    internal_names = re.findall(r"[a-z][a-z-]+", internal.split(":", 1)[1])
    assert "step" in internal_names and "fieldio-rank" in internal_names and "inventory-table" in internal_names
    assert not set(internal_names) & set(USER_COMMANDS)


def test_the_internal_commands_say_so_in_their_own_help(top_help):
    internal = re.findall(r"[a-z][a-z-]+", top_help.partition("internal commands the workflow's rules run")[2]
                          .split(":", 1)[1])
    for name in ("step", "write-figure"):
        result = cycleio(name, "--help")
        assert result.returncode == 0 and INTERNAL_NOTE in result.stdout, (name, result.stdout)
    assert INTERNAL_NOTE not in cycleio("check-config", "--help").stdout
    assert set(internal) >= rules_commands() - set(USER_COMMANDS)  # every rule's command is listed somewhere


def test_every_subcommand_the_rules_call_still_parses():
    names = rules_commands()
    assert {"step", "aggregate", "bench", "summary", "plan"} <= names  # the walk reads the rules
    for name in sorted(names):
        result = cycleio(name, "--help")
        assert result.returncode == 0, f"python -m cycleio {name} --help: {result.stderr}"
        assert result.stdout.startswith(f"usage: cycleio {name} "), result.stdout[:200]
