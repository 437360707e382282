"""Tests of cycleio.benchmarks.benchparse on real IOR 4.0.0 / mdtest / fio 3.33 outputs.

The files in tests/data/ior and tests/data/fio are unmodified copies of real
benchmark outputs; expected numbers are read from the files themselves. That all of them
make one tidy table of the row schema (benchmarks.rows) is test_rows'.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIO_OUTPUTS as FIO, FIO_JSON, IOR_JSON, IOR_OUTPUTS as IOR, IOR_TEXT, MDTEST
from cycleio.benchmarks import benchparse as bp  # conftest puts scripts/ on the path when not installed

IOR_ERRORS = {
    "error-unwritable-dir-1rank.json": 'ERROR: open64("/proc/nonexistent/testfile", 66, 0664) failed',
    "error-invalid-blocksize-1rank.json": "ERROR: block size must be a multiple of transfer size",
}
MIB = 2**20


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _check_schema(rows: list[dict]) -> None:
    assert rows
    for row in rows:
        assert tuple(row) == bp.ROW_KEYS
        for value in row.values():
            assert value is None or isinstance(value, (str, int, float, bool))


def test_data_present() -> None:
    assert len(IOR_JSON) == 7 and len(IOR_TEXT) == 2 and len(MDTEST) == 2 and len(FIO_JSON) == 14


# ---------------------------------------------------------------- IOR JSON


@pytest.mark.parametrize("path", IOR_JSON, ids=_ids(IOR_JSON))
def test_ior_json_matches_file(path: Path) -> None:
    raw = json.loads(path.read_text())
    rows = bp.parse_ior_json(path)
    _check_schema(rows)
    assert {r["tool"] for r in rows} == {"ior"}
    assert {r["tool_version"] for r in rows} == {raw["Version"]} == {"4.0.0"}
    assert {r["source"] for r in rows} == {path.name}

    results = raw["tests"][0]["Results"]
    reps = [r for r in rows if r["aggregate"] == "rep"]
    assert len(reps) == len(results) == 6
    # flat list write, read, write, read, ... -> repetitions 0, 0, 1, 1, 2, 2
    assert [r["operation"] for r in reps] == [e["access"] for e in results]
    assert [r["repetition"] for r in reps] == [0, 0, 1, 1, 2, 2]
    for row, entry in zip(reps, results):
        assert row["bw_MiB_per_s"] == entry["bwMiB"]
        assert row["ops_per_s"] == entry["iops"]
        assert row["seconds"] == entry["totalTime"]
        assert row["bytes"] == entry["blockKiB"] * 1024
        assert row["latency_s"] > 0

    for summary in raw["summary"]:
        op = summary["operation"]
        by_agg = {r["aggregate"]: r for r in rows if r["operation"] == op and r["aggregate"] != "rep"}
        assert set(by_agg) == {"max", "min", "mean"}
        assert by_agg["max"]["bw_MiB_per_s"] == summary["bwMaxMIB"]
        assert by_agg["min"]["bw_MiB_per_s"] == summary["bwMinMIB"]
        assert by_agg["mean"]["bw_MiB_per_s"] == summary["bwMeanMIB"]
        assert by_agg["max"]["ops_per_s"] == summary["OPsMax"]
        assert by_agg["mean"]["seconds"] == summary["MeanTime"]
        assert all(r["repetition"] is None for r in by_agg.values())
        assert by_agg["max"]["bytes"] == summary["xsizeMiB"] * MIB
        # the summary max is the best repetition (IOR rounds to 4 decimals)
        best = max(r["bw_MiB_per_s"] for r in reps if r["operation"] == op)
        assert by_agg["max"]["bw_MiB_per_s"] == pytest.approx(best, abs=1e-3)
    assert len(rows) == len(results) + 3 * len(raw["summary"])


@pytest.mark.parametrize("path", IOR_JSON, ids=_ids(IOR_JSON))
def test_ior_json_parameters(path: Path) -> None:
    raw = json.loads(path.read_text())
    params = raw["tests"][0]["Parameters"]
    cmd = raw["Command line"].split()
    for row in bp.parse_ior_json(path):
        assert row["api"] == "POSIX"
        assert row["tasks"] == 1 and row["nodes"] == 1 and row["segments"] == 1
        assert row["repetitions"] == 3
        assert row["file_per_proc"] is ("-F" in cmd)
        assert row["random"] is ("-z" in cmd)
        assert row["fsync"] is ("-e" in cmd) is True
        assert row["direct_io"] is ("--posix.odirect" in cmd)
        assert row["reorder"] == ("constant" if "-C" in cmd else "none")
        assert row["transfer_size_bytes"] == params["transferSize"]
        assert row["block_size_bytes"] == params["blockSize"]
        assert row["stonewall_s"] == 0.0
        assert row["job"] == "test0"


def test_ior_json_specific_values() -> None:
    ssf = bp.parse_ior_json(IOR / "posix-ssf-1rank-shm.json")
    assert {r["file_per_proc"] for r in ssf} == {False}
    rnd = bp.parse_ior_json(IOR / "posix-fpp-random4k-1rank-disk.json")
    assert {r["transfer_size_bytes"] for r in rnd} == {4096}
    write_max = next(r for r in rnd if r["operation"] == "write" and r["aggregate"] == "max")
    assert write_max["bw_MiB_per_s"] == 587.5079 and write_max["ops_per_s"] == 150402.0292
    odirect = bp.parse_ior_json(FIO / "limit-ior-posix-fpp-1g-odirect-1rank-disk.json")
    assert {r["direct_io"] for r in odirect} == {True}
    assert {r["block_size_bytes"] for r in odirect} == {2**30}


def test_ior_json_latency_rounded_to_zero_is_estimated() -> None:
    path = IOR / "posix-fpp-random4k-1rank-disk.json"
    results = json.loads(path.read_text())["tests"][0]["Results"]
    assert results[0]["latency"] == 0.0  # IOR prints 4 decimals
    reps = [r for r in bp.parse_ior_json(path) if r["aggregate"] == "rep"]
    transfers = 2**28 / 4096
    for row, entry in zip(reps, results):
        assert row["latency_s"] == pytest.approx(entry["wrRdTime"] / transfers)
    # a reported non-zero latency is kept as is
    fpp = IOR / "posix-fpp-1rank-disk.json"
    first = json.loads(fpp.read_text())["tests"][0]["Results"][0]
    assert bp.parse_ior_json(fpp)[0]["latency_s"] == first["latency"] == 0.0007


def test_ior_json_tolerates_bare_nan(tmp_path: Path) -> None:
    text = (IOR / "posix-fpp-1rank-disk.json").read_text()
    text = text.replace('"bwStdMIB": 102.9991', '"bwStdMIB": -nan', 1)
    assert "-nan" in text
    bad = tmp_path / "nan.json"
    bad.write_text(text)
    assert len(bp.parse_ior_json(bad)) == 12


# ---------------------------------------------------------------- IOR errors


@pytest.mark.parametrize("name", sorted(IOR_ERRORS))
def test_ior_json_error_reports_ior_error(name: str) -> None:
    path = IOR / name
    with pytest.raises(bp.BenchmarkOutputError) as info:
        bp.parse_ior_json(path)
    exc = info.value
    assert isinstance(exc, ValueError) and not isinstance(exc, json.JSONDecodeError)
    message = str(exc)
    assert name in message
    assert IOR_ERRORS[name] in message
    # the whole ERROR line of IOR's stdout is quoted
    stdout = path.with_name(name.replace(".json", ".stdout.txt")).read_text()
    error_line = next(line for line in stdout.splitlines() if line.startswith("ERROR"))
    assert error_line in message
    # parse_any recognises the broken file and reports the same
    with pytest.raises(bp.BenchmarkOutputError, match="ERROR: "):
        bp.parse_any(path)


def test_ior_json_truncated_and_empty_wording() -> None:
    with pytest.raises(bp.BenchmarkOutputError, match="truncated"):
        bp.parse_ior_json(IOR / "error-unwritable-dir-1rank.json")
    with pytest.raises(bp.BenchmarkOutputError, match="empty"):
        bp.parse_ior_json(IOR / "error-invalid-blocksize-1rank.json")


def test_ior_json_error_with_explicit_stdout(tmp_path: Path) -> None:
    name = "error-unwritable-dir-1rank"
    json_copy = tmp_path / "run.json"  # no run.stdout.txt beside it
    shutil.copy(IOR / f"{name}.json", json_copy)
    with pytest.raises(bp.BenchmarkOutputError) as info:
        bp.parse_ior_json(json_copy)
    assert "run.json" in str(info.value) and "no IOR stdout" in str(info.value)
    with pytest.raises(bp.BenchmarkOutputError) as info:
        bp.parse_ior_json(json_copy, stdout_path=IOR / f"{name}.stdout.txt")
    assert "run.json" in str(info.value) and IOR_ERRORS[f"{name}.json"] in str(info.value)


# ---------------------------------------------------------------- IOR text


def _text_tables(path: Path) -> tuple[list[list[str]], list[list[str]]]:
    """Rows of the per-iteration and summary tables, split on whitespace."""
    lines = path.read_text().splitlines()
    start = lines.index("Summary of all tests:")
    reps = [ln.split() for ln in lines[:start] if ln.startswith(("write ", "read "))]
    summary = [ln.split() for ln in lines[start + 2:] if ln.startswith(("write ", "read "))]
    return reps, summary


@pytest.mark.parametrize("path", IOR_TEXT, ids=_ids(IOR_TEXT))
def test_ior_text_matches_file(path: Path) -> None:
    rows = bp.parse_ior_text(path)
    _check_schema(rows)
    rep_lines, summary_lines = _text_tables(path)
    reps = [r for r in rows if r["aggregate"] == "rep"]
    assert len(reps) == len(rep_lines) == 6
    for row, cols in zip(reps, rep_lines):
        assert row["operation"] == cols[0]
        assert row["bw_MiB_per_s"] == float(cols[1])
        assert row["ops_per_s"] == float(cols[2])
        assert row["latency_s"] == float(cols[3])
        assert row["seconds"] == float(cols[9])
        assert row["repetition"] == int(cols[10])
    assert [r["repetition"] for r in reps] == [0, 0, 1, 1, 2, 2]
    for cols in summary_lines:
        by_agg = {r["aggregate"]: r for r in rows if r["operation"] == cols[0] and r["aggregate"] != "rep"}
        assert by_agg["max"]["bw_MiB_per_s"] == float(cols[1])
        assert by_agg["min"]["bw_MiB_per_s"] == float(cols[2])
        assert by_agg["mean"]["bw_MiB_per_s"] == float(cols[3])
        assert by_agg["max"]["ops_per_s"] == float(cols[5])
        assert by_agg["mean"]["seconds"] == float(cols[9])
        best = max(r["bw_MiB_per_s"] for r in reps if r["operation"] == cols[0])
        assert by_agg["max"]["bw_MiB_per_s"] == pytest.approx(best, abs=0.5)
    for row in rows:
        assert row["tool"] == "ior" and row["tool_version"] == "4.0.0" and row["api"] == "POSIX"
        assert row["file_per_proc"] is True and row["random"] is False
        assert row["transfer_size_bytes"] == MIB and row["block_size_bytes"] == 256 * MIB
        assert row["tasks"] == 1 and row["nodes"] == 1 and row["segments"] == 1
        assert row["fsync"] is True and row["direct_io"] is False and row["reorder"] == "constant"
        assert row["repetitions"] == 3 and row["bytes"] == 256 * MIB


def test_ior_text_and_json_give_same_columns() -> None:
    text_rows = bp.parse_ior_text(IOR / "posix-fpp-1rank-disk-text.stdout.txt")
    json_rows = bp.parse_ior_json(IOR / "posix-fpp-1rank-disk.json")
    ignore = {"source", "bw_MiB_per_s", "ops_per_s", "latency_s", "seconds"}
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ignore} for r in rows]  # noqa: E731
    assert strip(text_rows) == strip(json_rows)


# ---------------------------------------------------------------- mdtest

MDTEST_OPS = {
    "directory_creation", "directory_stat", "directory_rename", "directory_removal",
    "file_creation", "file_stat", "file_read", "file_removal", "tree_creation", "tree_removal",
}


@pytest.mark.parametrize("path", MDTEST, ids=_ids(MDTEST))
def test_mdtest_text_matches_file(path: Path) -> None:
    rows = bp.parse_mdtest_text(path)
    _check_schema(rows)
    assert len(rows) == 3 * len(MDTEST_OPS)
    assert {r["operation"] for r in rows} == MDTEST_OPS
    lines = path.read_text().splitlines()
    for line in lines[lines.index("SUMMARY rate: (of 2 iterations)") + 3:]:
        if line.startswith("--"):
            break
        *words, vmax, vmin, vmean, _std = line.split()
        op = "_".join(words).lower()
        by_agg = {r["aggregate"]: r for r in rows if r["operation"] == op}
        assert by_agg["max"]["ops_per_s"] == float(vmax)
        assert by_agg["min"]["ops_per_s"] == float(vmin)
        assert by_agg["mean"]["ops_per_s"] == float(vmean)
    for row in rows:
        assert row["tool"] == "mdtest" and row["tool_version"] == "4.0.0"
        assert row["tasks"] == 1 and row["nodes"] == 1 and row["repetitions"] == 2
        assert row["repetition"] is None and row["bw_MiB_per_s"] is None


def test_mdtest_specific_value() -> None:
    rows = bp.parse_mdtest_text(IOR / "mdtest-1rank-disk.stdout.txt")
    row = next(r for r in rows if r["operation"] == "file_creation" and r["aggregate"] == "max")
    assert row["ops_per_s"] == 34377.287


# ---------------------------------------------------------------- fio


@pytest.mark.parametrize("path", FIO_JSON, ids=_ids(FIO_JSON))
def test_fio_json_matches_file(path: Path) -> None:
    raw = json.loads(path.read_text())
    job = raw["jobs"][0]
    opts = job["job options"]
    rows = bp.parse_fio_json(path)
    _check_schema(rows)
    assert len(rows) == 1  # group_reporting: one entry, one op with I/O
    row = rows[0]
    op_name = "read" if job["read"]["io_bytes"] > 0 else "write"
    op = job[op_name]
    assert row["tool"] == "fio" and row["tool_version"] == "3.33" and row["source"] == path.name
    assert row["ops_per_s"] == op["iops"]
    assert row["seconds"] == op["runtime"] / 1000
    numjobs = int(opts["numjobs"])
    assert row["tasks"] == numjobs
    assert row["aggregate"] == ("group" if numjobs > 1 else "job")
    assert row["repetition"] == 0 and row["nodes"] == 1
    assert row["api"] == opts["ioengine"]
    assert row["transfer_size_bytes"] == {"1M": MIB, "4k": 4096}[opts["bs"]]
    assert row["direct_io"] is (opts.get("direct") == "1")
    assert row["fsync"] is (opts.get("end_fsync") == "1")
    assert row["random"] is False and row["file_per_proc"] is True
    if opts["ioengine"] in ("filecreate", "filestat"):
        assert row["operation"] == {"filecreate": "create", "filestat": "stat"}[opts["ioengine"]]
        assert row["bw_MiB_per_s"] is None and row["bytes"] is None
        assert op["lat_ns"]["N"] == 0  # only clat is sampled for these engines
        assert row["latency_s"] == op["clat_ns"]["mean"] / 1e9
    else:
        assert row["operation"] == op_name
        assert row["bw_MiB_per_s"] == op["bw_bytes"] / 2**20
        assert row["bw_MiB_per_s"] == pytest.approx(op["bw"] / 1024, rel=1e-3)
        assert row["bytes"] == op["io_bytes"] == numjobs * 2**30
        assert row["block_size_bytes"] == 2**30
        assert row["latency_s"] == op["lat_ns"]["mean"] / 1e9


def test_fio_specific_values() -> None:
    row = bp.parse_fio_json(FIO / "fio-seqwrite-1m-direct-2job-disk.json")[0]
    assert row["bw_MiB_per_s"] == 1801580241 / 2**20
    assert row["ops_per_s"] == 1718.120805 and row["seconds"] == 1.192
    assert row["direct_io"] is True and row["tasks"] == 2 and row["operation"] == "write"
    row = bp.parse_fio_json(FIO / "fio-seqwrite-1m-buffered-endfsync-1job-disk.json")[0]
    assert row["fsync"] is True and row["direct_io"] is False and row["tasks"] == 1
    row = bp.parse_fio_json(FIO / "fio-filecreate-2000-2job-disk.json")[0]
    assert row["operation"] == "create" and row["ops_per_s"] == 2670.226969


def test_fio_leading_and_trailing_garbage(tmp_path: Path) -> None:
    src = FIO / "fio-seqread-1m-direct-1job-disk.json"
    noisy = tmp_path / "noisy.out"
    noisy.write_text("fio: warning: {sic} O_DIRECT on tmpfs\nnote: both iodepth >= 1 and synchronous\n"
                     + src.read_text() + "\nfio: pid=1, got signal\n")
    assert bp.parse_fio_json(noisy) == [dict(r, source="noisy.out") for r in bp.parse_fio_json(src)]
    assert bp.parse_any(noisy)[0]["operation"] == "read"


def test_fio_truncated(tmp_path: Path) -> None:
    text = (FIO / "fio-seqread-1m-direct-1job-disk.json").read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: len(text) // 2])
    with pytest.raises(bp.BenchmarkOutputError, match=r"cut\.json.*truncated"):
        bp.parse_fio_json(cut)
    with pytest.raises(bp.BenchmarkOutputError, match=r"cut\.json"):
        bp.parse_any(cut)


def test_fio_job_error(tmp_path: Path) -> None:
    raw = json.loads((FIO / "fio-seqread-1m-direct-1job-disk.json").read_text())
    raw["jobs"][0]["error"] = 28
    failed = tmp_path / "failed.json"
    failed.write_text(json.dumps(raw))
    with pytest.raises(bp.BenchmarkOutputError, match=r"failed\.json.*error 28"):
        bp.parse_fio_json(failed)


def test_fio_without_group_reporting(tmp_path: Path) -> None:
    raw = json.loads((FIO / "fio-seqwrite-1m-direct-2job-disk.json").read_text())
    raw["jobs"] = [raw["jobs"][0], dict(raw["jobs"][0])]  # one entry per job process
    per_job = tmp_path / "perjob.json"
    per_job.write_text(json.dumps(raw))
    rows = bp.parse_fio_json(per_job)
    assert [(r["aggregate"], r["tasks"]) for r in rows] == [("job", 1), ("job", 1)]


# ---------------------------------------------------------------- parse_any


@pytest.mark.parametrize(
    "path",
    IOR_JSON + IOR_TEXT + MDTEST + FIO_JSON,
    ids=_ids(IOR_JSON + IOR_TEXT + MDTEST + FIO_JSON),
)
def test_parse_any_dispatches(path: Path) -> None:
    if path in FIO_JSON:
        expected = bp.parse_fio_json(path)
    elif path in MDTEST:
        expected = bp.parse_mdtest_text(path)
    elif path in IOR_TEXT:
        expected = bp.parse_ior_text(path)
    else:
        expected = bp.parse_ior_json(path)
    assert bp.parse_any(path) == expected


def test_parse_any_uses_content_not_name(tmp_path: Path) -> None:
    cases = {
        "a.txt": (IOR / "posix-ssf-1rank-disk.json", "ior"),
        "b.json": (IOR / "posix-fpp-1rank-shm-text.stdout.txt", "ior"),
        "c.log": (IOR / "mdtest-1rank-shm.stdout.txt", "mdtest"),
        "d.stdout.txt": (FIO / "fio-filestat-2000-1job-disk.json", "fio"),
    }
    for name, (src, tool) in cases.items():
        shutil.copy(src, tmp_path / name)
        rows = bp.parse_any(tmp_path / name)
        assert {r["tool"] for r in rows} == {tool} and rows[0]["source"] == name


ALL_IOR_FILES = sorted(IOR.iterdir())


@pytest.mark.parametrize("path", ALL_IOR_FILES, ids=_ids(ALL_IOR_FILES))
def test_parse_any_on_every_ior_sample(path: Path) -> None:
    """Every IOR/mdtest sample either parses or fails with a message naming it."""
    parseable = path in IOR_JSON or path in IOR_TEXT or path in MDTEST
    if parseable:
        _check_schema(bp.parse_any(path))
        return
    with pytest.raises(bp.BenchmarkOutputError) as info:
        bp.parse_any(path)
    message = str(info.value)
    assert path.name in message
    if path.name.endswith(".stdout.txt"):
        if path.name.startswith("error-"):
            assert "ERROR: " in message  # IOR's own error line
        else:
            assert "JSON summary" in message  # "Writing output to ..." only
    if path.name.endswith(".mdtest.csv"):
        assert "CSV" in message


@pytest.mark.parametrize(
    "content, why",
    [
        ("", "empty"),
        ("hello world\n", "unrecognised"),
        ('{"name": "x", "command_line": "ior", "argv": ["ior"]}', "metadata"),
        ('{"some": "json"}', "unknown kind"),
        ("seqjob: (groupid=0, jobs=1): err= 0: pid=1\n", "--output-format=json"),
    ],
)
def test_parse_any_unknown_content(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "mystery.out"
    path.write_text(content)
    with pytest.raises(bp.BenchmarkOutputError, match=why) as info:
        bp.parse_any(path)
    assert "mystery.out" in str(info.value)


def test_parse_any_dd_is_rejected() -> None:
    path = FIO / "dd-write-1m-x1024-fdatasync-disk.stdout.txt"
    with pytest.raises(bp.BenchmarkOutputError, match="dd output"):
        bp.parse_any(path)


def test_missing_file_raises_benchmark_error(tmp_path: Path) -> None:
    with pytest.raises(bp.BenchmarkOutputError, match="nope.json"):
        bp.parse_any(tmp_path / "nope.json")
