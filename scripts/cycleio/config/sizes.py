"""A config key's size in bytes, or a ConfigError naming the key.

Sizes are read one way everywhere, config keys, command-line options and tool outputs: units.size_or_none
(which says what a size is) reads them; this module adds the error that names the key.
"""

from __future__ import annotations

from typing import Any

from ..units import size_or_none
from .keys import ConfigError


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
