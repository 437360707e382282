"""Field I/O (FDB-like objects): the access patterns' plans, the two layouts, and real MPI runs
with 2, 3 and 4 processes under the launcher."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import hanging_launchers, require_tool
from cycleio.benchmarks import fieldio
from cycleio.benchmarks.benchparse import BenchmarkOutputError, parse_any, parse_fieldio_json
from cycleio.benchmarks.common import BenchmarkError
from cycleio.benchmarks.tierbench import FieldIOSpec

KIB = 1024


def test_plans_of_the_access_patterns():
    setup, phases = fieldio.plan("0A", 1, 4, 3)
    assert setup == [] and phases == [[("write", "shared", 1)] * 3]
    _, phases = fieldio.plan("0B", 2, 4, 2)
    assert phases == [[("write", "t2.f00000", 2), ("write", "t2.f00001", 2)]]
    _, phases = fieldio.plan("1", 0, 2, 2)
    assert [[op for op, _, _ in phase] for phase in phases] == [["write", "write"], ["read", "read"]]
    assert phases[0][1][1] == phases[1][1][1]  # reads the keys it wrote
    # 2B: tasks 0, 1 write pair0, pair1; tasks 2, 3 read them; an odd task out sits out
    assert fieldio.plan("2B", 1, 4, 2) == ([("write", "pair1", 1)], [[("write", "pair1", 1)] * 2])
    assert fieldio.plan("2B", 3, 4, 2) == ([], [[("read", "pair1", 1)] * 2])
    assert fieldio.plan("2B", 2, 3, 2) == ([], [[]])
    with pytest.raises(ValueError, match="2B needs at least 2 tasks"):
        fieldio.plan("2B", 0, 1, 2)
    with pytest.raises(ValueError, match="unknown access pattern '3'"):
        fieldio.plan("3", 0, 1, 2)


@pytest.mark.parametrize("layout", fieldio.LAYOUTS)
def test_layouts_write_and_read_fields_back(tmp_path, layout):
    writer = fieldio.make_store(layout, tmp_path, 0, fsync=True)
    first, second = b"a" * 1000, b"b" * 1000
    assert writer.write("k", first) == 1000
    assert writer.write("k", second) == 1000  # a new version of the same key
    assert writer.write("other", first) == 1000
    reader = fieldio.make_store(layout, tmp_path, 1, fsync=False)
    assert reader.read("k", owner=0) == 1000
    if layout == "file_per_field":
        assert (tmp_path / "k.field").read_bytes() == second
        assert not list(tmp_path.glob(".*tmp"))
    else:
        assert reader.lookup("k", 0) == (1000, 1000)  # the newest version
        assert (tmp_path / "data.0.bin").stat().st_size == 3000
        with open(tmp_path / "index.0.txt", "a") as index:
            index.write("k 5000 10")  # an entry still being written is not seen
        assert reader.lookup("k", 0) == (1000, 1000)
        with pytest.raises(KeyError, match="field 'missing' is not in the index of task 0"):
            reader.read("missing", 0)
    writer.close()
    reader.close()


def run(tmp_path: Path, tasks: int, spec: FieldIOSpec, repetitions: int = 1, where: Path | None = None) -> list[dict]:
    require_tool("mpiexec", "field I/O runs its tasks as MPI ranks (pip install mpich)")
    raw = tmp_path / "raw"
    raw.mkdir(exist_ok=True)
    return fieldio.run_fieldio(where or tmp_path / "tier", spec, tasks, repetitions, "mpiexec -n {ntasks}", raw,
                               f"fieldio.n{tasks}")


@pytest.mark.tool
def test_every_pattern_and_layout_runs_for_real(tmp_path):
    # 4 tasks: several writers of the shared file and two pairs for 2B (2 and 3 tasks run in the tests below)
    tasks, fields, size = 4, 6, 16 * KIB
    spec = FieldIOSpec(fields_per_task=fields, field_size_bytes=size, fsync=True)
    rows = run(tmp_path, tasks, spec)
    got = {(r["job"], r["api"], r["operation"]): r for r in rows}
    expected = {(p, layout, op) for p in ("0A", "0B", "1") for layout in fieldio.LAYOUTS for op in ("write",)}
    expected |= {(p, layout, op) for p in ("1", "2B") for layout in fieldio.LAYOUTS for op in ("write", "read")}
    assert set(got) == expected
    for (pattern, _, op), row in got.items():
        writers = tasks // 2 if pattern == "2B" else tasks
        assert row["bytes"] == writers * fields * size, (pattern, op)
        assert row["tasks"] == tasks and row["tool"] == "cycleio-fieldio"
        assert row["bw_MiB_per_s"] > 0 and row["ops_per_s"] > 0 and 0 < row["latency_s"] <= row["seconds"]
        assert row["segments"] == fields and row["transfer_size_bytes"] == size and row["fsync"] is True
    # the raw output keeps the latency of every single operation
    raw = json.loads((tmp_path / "raw" / f"fieldio.n{tasks}.json").read_text())
    one = next(r for r in raw["runs"] if r["pattern"] == "1" and r["layout"] == "appended")
    assert len(one["ops"]["seconds"]) == 2 * tasks * fields
    assert sorted(set(one["ops"]["rank"])) == list(range(tasks))
    assert json.loads((tmp_path / "raw" / f"fieldio.n{tasks}.meta.json").read_text())["exit_code"] == 0
    assert not any((tmp_path / "tier").iterdir())  # every run cleans up after itself
    assert parse_any(tmp_path / "raw" / f"fieldio.n{tasks}.json") == rows


@pytest.mark.tool
def test_repetitions_and_a_memory_tier(tmp_path):
    shm = Path("/dev/shm") / f"cycleio-test-fieldio-{os.getpid()}"
    try:
        spec = FieldIOSpec(patterns=("1",), layouts=("file_per_field",), fields_per_task=3, field_size_bytes=4 * KIB)
        rows = run(tmp_path, 2, spec, repetitions=3, where=shm)
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    assert sorted((r["operation"], r["repetition"]) for r in rows) == [
        ("read", 0), ("read", 1), ("read", 2), ("write", 0), ("write", 1), ("write", 2)]


@pytest.mark.tool
def test_a_failing_rank_fails_the_run_with_its_reason(tmp_path):
    spec = FieldIOSpec(patterns=("0B",), layouts=("bogus",), fields_per_task=1, field_size_bytes=KIB)
    with pytest.raises(BenchmarkError, match=r"field I/O failed \(exit code \d+\): .*unknown field layout 'bogus'"):
        run(tmp_path, 2, spec)


@pytest.mark.tool
@pytest.mark.mpi  # waits out two hung start-ups: in make test, not make test-fast
def test_ranks_that_hang_in_mpi_start_up_are_launched_again(tmp_path, monkeypatch, caplog):
    """A fault that cannot be caused at will, by the stand-in launchers of conftest.hanging_launchers."""
    from cycleio import process

    mpiexec = require_tool("mpiexec", "field I/O runs its tasks as MPI ranks (pip install mpich)")
    monkeypatch.setattr(process, "startup_timeout", lambda ntasks: 3.0)
    once, always = hanging_launchers(tmp_path, mpiexec)
    spec = FieldIOSpec(patterns=("0B",), layouts=("file_per_field",), fields_per_task=1, field_size_bytes=KIB)
    raw = tmp_path / "raw"
    raw.mkdir()
    with caplog.at_level("WARNING"):
        rows = fieldio.run_fieldio(tmp_path / "tier", spec, 2, 1, once, raw, "fieldio.n2")
    assert rows and "field I/O: its ranks did not all start within 3 s: stopped and launched again" in caplog.text
    assert not list(raw.glob("*.started"))
    with pytest.raises(BenchmarkError, match="field I/O did not start twice: its ranks did not all pass MPI's "
                                             "start-up within 3 s"):
        fieldio.run_fieldio(tmp_path / "tier", spec, 2, 1, always, raw, "fieldio.n2")


def test_parser_refuses_other_and_broken_outputs(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    with pytest.raises(BenchmarkOutputError, match="empty.json: field I/O output is empty"):
        parse_fieldio_json(empty)
    truncated = tmp_path / "cut.json"
    truncated.write_text('{"tool": "cycleio-fieldio", "runs": [{"pattern": "1"')
    with pytest.raises(BenchmarkOutputError, match="cut.json: field I/O JSON output is unusable: truncated JSON"):
        parse_any(truncated)


@pytest.mark.tool
def test_fieldio_command_by_hand(tmp_path, capsys):
    require_tool("mpiexec", "field I/O runs its tasks as MPI ranks (pip install mpich)")
    import pandas as pd

    from cycleio.cli import main

    out = tmp_path / "rows.csv"
    assert main(["fieldio", "--dir", str(tmp_path / "store"), "--tasks", "3", "--patterns", "1", "2B",
                 "--layouts", "appended", "--fields", "4", "--field-size", "8k", "--repetitions", "2",
                 "--out", str(out)]) == 0
    rows = pd.read_csv(out, dtype={"pattern": str, "job": str})
    reps = rows[rows["aggregate"] == "rep"]
    assert sorted(set(zip(reps["pattern"], reps["operation"]))) == [("1", "read"), ("1", "write"), ("2B", "read"),
                                                                    ("2B", "write")]
    assert len(reps) == 4 * 2 and set(rows["tasks"]) == {3} and set(rows["tier"]) == {"store"}
    assert set(rows[rows["aggregate"] != "rep"]["aggregate"]) == {"max", "min", "mean"}
    assert (tmp_path / "rows.raw" / "fieldio.n3.json").is_file()
    assert list((tmp_path / "store").iterdir()) == []
