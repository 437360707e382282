"""benchmarks.points: a point's folder on its tier, its rows with their context and cache flag, and the
max/min/mean over repetitions."""

from __future__ import annotations

from conftest import point_settings
from cycleio.benchmarks import points
from cycleio.benchmarks.common import COLUMNS
from cycleio.benchmarks.specs import IOPattern
from cycleio.config.tierspec import Tier


def rep(repetition: int, operation: str, bw: float | None, seconds: float, t_start: float, **extra) -> dict:
    return {"pattern": "easy", "api": "POSIX", "job": "j", "operation": operation, "tasks": 2, "aggregate": "rep",
            "repetition": repetition, "source": "s.json", "bw_MiB_per_s": bw, "ops_per_s": None,
            "latency_s": None, "seconds": seconds, "bytes": 1000 + repetition, "t_start": t_start, **extra}


def test_summaries_are_the_max_min_and_mean_of_the_repetitions():
    rows = [rep(0, "write", 100.0, 2.0, 10.0), rep(1, "write", 300.0, 4.0, 5.0), rep(2, "write", None, 6.0, None),
            rep(0, "read", 50.0, 1.0, 20.0), {**rep(9, "write", 1e9, 1.0, 0.0), "aggregate": "max"}]
    summary = {(row["operation"], row["aggregate"]): row for row in points.summarize(rows)}
    assert set(summary) == {(op, agg) for op in ("write", "read") for agg in ("max", "min", "mean")}
    write_max, write_min, write_mean = (summary["write", agg] for agg in ("max", "min", "mean"))
    assert (write_max["bw_MiB_per_s"], write_min["bw_MiB_per_s"], write_mean["bw_MiB_per_s"]) == (300.0, 100.0, 200.0)
    assert write_mean["seconds"] == 4.0 and write_mean["bytes"] == 1001 and write_max["seconds"] is None
    assert write_max["ops_per_s"] is None and write_max["repetition"] is None and write_max["t_start"] == 5.0
    assert summary["read", "mean"]["bw_MiB_per_s"] == 50.0  # each operation on its own, the tool's max row ignored


def test_finished_rows_carry_the_points_context_and_the_cache_flag_in_the_columns_order():
    context = {"study": "s", "benchmark": "io", "pattern": "easy", "tier": "disk", "tier_kind": "posix",
               "fs_type": "ext4", "host": "h"}
    rows = [rep(0, "read", 10.0, 1.0, 0.0), rep(0, "read", 10.0, 1.0, 0.0, direct_io=True),
            rep(0, "write", 10.0, 1.0, 0.0), rep(0, "read", 10.0, 1.0, 0.0, cold_cache=True)]
    out = points.finish(rows, context, t_start=12.34567, overrides={"tasks": 4})
    assert all(list(row) == list(COLUMNS) for row in out)
    assert [row["cache_risk"] for row in out] == [True, False, False, False]
    assert all(row["t_start"] == 12.346 and row["tasks"] == 4 and row["tier"] == "disk" for row in out)
    on_memory = points.finish(rows[:1], {**context, "tier_kind": "memory"}, 0.0)
    assert on_memory[0]["cache_risk"] is False  # a memory tier's reads are the tier's speed


def test_a_points_folder_is_in_the_studys_benchmark_folder_and_fresh_empties_it(tmp_path):
    tier = Tier("disk", "posix", str(tmp_path / "tier"))
    site, folder = points.benchmark_folder(tier, "s", "io-easy-2")
    assert folder == tmp_path / "tier" / "s" / "bench" / "io-easy-2" and site.root.is_dir()
    (points.fresh(folder) / "old").write_text("x")
    assert points.fresh(folder) == folder and list(folder.iterdir()) == []
    settings = point_settings("io", tier, IOPattern(name="easy"))
    context = points.context(settings, site)
    assert (context["study"], context["benchmark"], context["pattern"], context["tier"]) == ("t", "io", "easy", "disk")
    assert context["fs_type"] == site.fs_type and points.context(settings, site, "other")["pattern"] == "other"


def test_the_log_names_each_repetitions_rate(caplog):
    rows = [rep(0, "write", 12.34, 1.0, 0.0), {**rep(1, "stat", None, 1.0, 0.0), "ops_per_s": 99.6},
            rep(2, "read", None, 1.0, 0.0), {**rep(3, "read", 1.0, 1.0, 0.0), "aggregate": "max"}]
    with caplog.at_level("INFO", logger="cycleio"):
        points.log_rows("io easy", rows)
    assert caplog.messages == ["io easy rep 0: write 12.3 MiB/s", "io easy rep 1: stat 100 ops/s",
                               "io easy rep 2: read -"]
