"""Sizes in bytes, read one way everywhere: config keys, command-line options and tool outputs.

A size is a whole number of bytes (47008), or a number with a binary unit as IOR and fio read it:
``64k``, ``1m``, ``2MiB``, ``1.5 GiB``, ``4096 bytes`` (k, m, g, t, p, e: powers of 1024; an ``iB``
or ``B`` after the unit changes nothing).
"""

from __future__ import annotations

import re
from typing import Any

from .keys import ConfigError

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


def parse_size(value: Any, key: str) -> int:
    """Bytes from 47008, "47008", "1m", "2MiB", "64k", for config key (or option) ``key``; positive."""
    size = size_or_none(value)
    if isinstance(value, bool):
        raise ConfigError(f"config key '{key}': expected a size such as 1m or 47008, got {value!r}")
    if size is None:
        raise ConfigError(
            f"config key '{key}': {value!r} is not a size; expected bytes or a number with k, m, g (e.g. 1m, 47008)"
        )
    if size <= 0:
        raise ConfigError(f"config key '{key}': a size must be positive, got {value!r}")
    return size
