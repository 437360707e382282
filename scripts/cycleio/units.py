"""Units the study reports in: MiB and MiB/s are 2**20 bytes (as IOR and fio report them).

A size is a whole number of bytes (47008), or a number with a binary unit as IOR and fio read it:
``64k``, ``1m``, ``2MiB``, ``1.5 GiB``, ``4096 bytes`` (k, m, g, t, p, e: powers of 1024; an ``iB``
or ``B`` after the unit changes nothing). config.sizes.parse_size reads a config key's size with it.

A size printed for people (messages, captions, the CLI) is format_bytes's: ``512 B``, ``1.5 KiB``,
``40.0 GiB``. humanfriendly.format_size would say ``512 bytes`` and ``40 GiB``, and round to two
decimals, so the study's messages keep this one style. A duration is format_seconds's (``1,234.5 s``,
``6.0 s``, ``0.43 s``, ``0.043 s``), a rate format_rate's (``1,234 MiB/s``). Table columns stay numbers.
"""

from __future__ import annotations

import re
from typing import Any

MiB = 2**20

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:([kmgtpe])(?:i?b)?|b|bytes?)?\s*$", re.I)
_SCALE = {None: 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50, "e": 2**60}


def size_or_none(value: Any) -> int | None:
    """Bytes, or None for what is not a size (a range such as 4k-16k, a percentage, a bool, None)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    match = _SIZE.match(str(value))
    if not match:
        return None
    unit = match.group(2).lower() if match.group(2) else None
    return int(float(match.group(1)) * _SCALE[unit])


def format_bytes(n: float) -> str:
    """A size for people: whole bytes below 1 KiB, else one decimal in the largest binary unit up to TiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def format_seconds(seconds: float | None, unit: str = " s") -> str:
    """A duration for people: from 0.95 s up to a tenth (thousands separated), below to two significant digits;
    ``-`` for none. ``unit=""`` gives the bare number, for a band written after its value (``0.4 s (0.1-0.7)``)."""
    if seconds is None or seconds != seconds:
        return "-"
    return (f"{seconds:,.1f}" if abs(seconds) >= 0.95 else f"{seconds:.2g}") + unit


def format_rate(MiB_per_s: float) -> str:
    """A bandwidth for people: whole MiB/s, thousands separated."""
    return f"{MiB_per_s:,.0f} MiB/s"
