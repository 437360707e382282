"""units: the one size grammar for tools' outputs and the one size, duration and rate formatter for people."""

from __future__ import annotations

import pytest

from cycleio.units import MiB, format_bytes, format_rate, format_seconds, size_or_none

MIB = 2**20


def test_what_is_not_a_size_in_a_tools_output_is_none():
    assert [size_or_none(v) for v in ("4k-16k", "10%", None, True, "")] == [None] * 5


@pytest.mark.parametrize("nbytes, text", [
    (0, "0 B"), (512, "512 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (32 * MIB, "32.0 MiB"),
    (40 * 2**30, "40.0 GiB"), (10**12, "931.3 GiB"), (5 * 2**50, "5120.0 TiB"),
])
def test_one_size_formatter_for_people(nbytes, text):
    """Messages, captions and the CLI print sizes one way: whole bytes, else one decimal in a binary unit."""
    from cycleio.units import format_bytes

    assert format_bytes(nbytes) == text


@pytest.mark.parametrize("value, expected", [
    (" 8k ", 8192), ("1.5 GiB", 3 * 2**29), ("3KB", 3072), ("1e", 2**60), ("2 byte", 2), ("0", 0), (7, 7),
])
def test_units_and_spaces_a_tool_prints_are_read(value, expected):
    assert size_or_none(value) == expected


@pytest.mark.parametrize("value", ["1 zb", "k", "-4k", "1,5m", "12 MB/s"])
def test_what_only_looks_like_a_size_is_none(value):
    assert size_or_none(value) is None


def test_negative_sizes_format_like_positive_ones_and_mib_is_binary():
    assert format_bytes(-1536) == "-1.5 KiB" and format_bytes(-3) == "-3 B"
    assert MiB == 1024 * 1024


@pytest.mark.parametrize("seconds, text", [(11220.4, "11,220.4 s"), (6.0, "6.0 s"), (0.96, "1.0 s"), (0.43, "0.43 s"),
                                           (0.043, "0.043 s"), (-0.4, "-0.4 s"), (None, "-"), (float("nan"), "-")])
def test_a_duration_reads_to_a_tenth_from_a_second_up_and_to_two_digits_below(seconds, text):
    assert format_seconds(seconds) == text


def test_a_bare_duration_for_a_band_and_a_rate_in_whole_MiB_per_s():
    assert format_seconds(0.43, "") == "0.43" and format_rate(1234.5) == "1,234 MiB/s"
