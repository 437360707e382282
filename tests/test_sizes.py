"""config.sizes: a config key's size read with the one grammar, and refused naming the key."""

from __future__ import annotations

import pytest

from cycleio.config.settings import ConfigError
from cycleio.config.sizes import parse_size
from cycleio.units import size_or_none

MIB = 2**20


@pytest.mark.parametrize("value, expected", [
    (47008, 47008), ("47008", 47008), ("1m", MIB), ("2MiB", 2 * MIB), ("64k", 65536), ("1g", 2**30),
    ("1.5m", 3 * MIB // 2), ("1 MiB", MIB), ("4096 bytes", 4096), ("100b", 100), ("2T", 2 * 2**40),
])
def test_one_size_grammar(value, expected):
    assert parse_size(value, "k") == expected
    assert size_or_none(value) == expected


@pytest.mark.parametrize("value, message", [
    ("lots", r"config key 'x.size': 'lots' is not a size; expected bytes or a number with k, m, g"),
    (0, r"config key 'x.size': a size must be positive, got 0"),
    (True, r"config key 'x.size': expected a size such as 1m or 47008, got True"),
])
def test_size_errors_name_the_key(value, message):
    with pytest.raises(ConfigError, match=message):
        parse_size(value, "x.size")


