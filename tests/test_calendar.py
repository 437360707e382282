import pytest

from cycleio.config.calendar import (
    com_dir,
    cycles,
    is_half_cycle,
    parse_cycle,
    previous_cycle,
    step_rank,
    steps_of_cycle,
)


@pytest.mark.parametrize(
    "cycle, previous",
    [
        ("2026010106", "2026010100"),
        ("2026010100", "2025123118"),  # across a year end
        ("2026030100", "2026022818"),  # across February's end
        ("2028030100", "2028022918"),  # leap year
        ("2026050100", "2026043018"),  # across a 30-day month's end
    ],
)
def test_previous_cycle_across_month_and_year_ends(cycle, previous):
    assert previous_cycle(cycle) == previous


def test_cycles_are_chronological_every_six_hours():
    assert cycles("2026123112", "2027010100") == ["2026123112", "2026123118", "2027010100"]
    assert cycles(2026010100, 2026010100) == ["2026010100"]  # --config delivers integers


def test_cycles_refuse_end_before_start():
    with pytest.raises(ValueError, match="before start"):
        cycles("2026010106", "2026010100")


def test_half_cycle_is_the_first_and_runs_fcst_and_post_only():
    assert is_half_cycle("2026010100", "2026010100")
    assert not is_half_cycle("2026010106", "2026010100")
    assert steps_of_cycle("2026010100", "2026010100") == ("fcst", "post")
    assert steps_of_cycle("2026010106", "2026010100") == ("prep", "anal", "fcst", "post")


@pytest.mark.parametrize("bad", ["202601010", "2026010124", "2026013100x", "2026023000"])
def test_parse_cycle_rejects_malformed(bad):
    with pytest.raises(ValueError, match="cycle"):
        parse_cycle(bad)


def test_com_dir_follows_gdas_layout():
    assert com_dir("2026010118") == "gdas.20260101/18"


def test_steps_sort_in_the_gdas_order_then_other_jobs_by_name():
    assert sorted({"post", "darshan_a", "cycle", "fcst", "prep", "anal", "efcs01"}, key=step_rank) == [
        "prep", "anal", "fcst", "post", "cycle", "darshan_a", "efcs01"]
