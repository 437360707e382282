"""Benchmark outputs to tidy rows (:mod:`cycleio.benchmarks.rows`): any output, its tool told from the
file's content (``cycleio parse``), or one tool's parser by name.

Each tool module (:mod:`cycleio.benchmarks.tools`, and :mod:`cycleio.benchmarks.fieldio` for cycleio's
own field I/O) says whether it can open a file (``guess_can_open``) and parses it (``parse``); a file
no parser takes is named with what it is, when that can be told (``unsupported``, or the generic
cases below).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from . import fieldio
from .rows import ROW_KEYS, BenchmarkOutputError, decode_json_object, read_text
from .tools import TOOLS, fio, ior, mdtest

__all__ = [
    "ROW_KEYS",
    "BenchmarkOutputError",
    "parse_ior_json",
    "parse_ior_text",
    "parse_mdtest_text",
    "parse_fio_json",
    "parse_fieldio_json",
    "parse_any",
]

parse_ior_json = ior.parse_json
parse_ior_text = ior.parse_text
parse_mdtest_text = mdtest.parse
parse_fio_json = fio.parse
parse_fieldio_json = fieldio.parse_fieldio_json


def parse_any(path: str | Path) -> list[dict[str, Any]]:
    """Detect the output format from the file's content and parse it.

    Recognised: IOR JSON summary, IOR text output, mdtest text output, fio
    JSON, cycleio field-I/O JSON.  An empty or truncated IOR JSON summary is recognised by its content
    or by the IOR stdout beside it, so IOR's error is reported.  Anything else
    (mdtest CSV, dd output, run metadata, IOR stdout that only points to its
    JSON file, ...) raises BenchmarkOutputError saying what the file is.
    """
    path = Path(path)
    text = read_text(path)
    for reader in (fieldio, *TOOLS.values()):
        if reader.guess_can_open(path, text):
            return reader.parse(path)
    raise BenchmarkOutputError(f"{path}: {_what_it_is(text)}")


def _what_it_is(text: str) -> str:
    """Why no parser takes this text: what it is, when that can be told."""
    head = text.lstrip()[:4000]
    if not head:
        return "empty file, cannot tell which benchmark wrote it"
    for tool in TOOLS.values():
        reason = tool.unsupported(text)
        if reason:
            return reason
    if re.search(r"records (in|out)", head) and re.search(r"bytes .* copied", head):
        return "dd output (not supported)"
    if '"command_line"' in head and '"argv"' in head:
        return "run metadata (*.meta.json), not benchmark output"
    if head.startswith("{"):
        data, reason = decode_json_object(text)
        return reason if data is None else f"JSON of unknown kind (keys: {sorted(data)[:8]})"
    return f"unrecognised content (first line: {head.splitlines()[0][:120]!r})"
