"""Benchmark subcommands of ``cycleio`` (IOR, mdtest, fio, field I/O, parsing)."""

from __future__ import annotations


def register(sub) -> None:
    """Add the benchmark subcommands to the ``cycleio`` parser's subparsers."""
