"""The smoke study end to end through Snakemake: tables, resume, lint and format."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import (assert_axes_carry_data, assert_png_drawn, assert_study_matches_page,
                      assert_study_matches_snapshot, bar_sizes, require_tool, snakemake)

from cycleio.report.closeness import as_flag
from cycleio import fsutil
from cycleio.storage import checksums

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
# the tables a test of the jobs reads, without the figures made from them
TABLES = ["results/smoke/tables/io_events.parquet", "results/smoke/tables/retries.csv"]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory, request):
    """Run the smoke study once for this module, on tiers private to the test."""
    repo = Path(__file__).resolve().parents[1]
    workdir = tmp_path_factory.mktemp("smoke")
    shm = Path("/dev/shm") / f"cycleio-test-{os.getpid()}"
    tiers = {
        "tiers": {
            "node_local": {"kind": "node_local", "path": str(workdir / "node_local")},
            "shm": {"kind": "memory", "path": str(shm)},
        }
    }
    (workdir / "tiers.yaml").write_text(yaml.safe_dump(tiers))
    request.addfinalizer(lambda: shutil.rmtree(shm, ignore_errors=True))
    snakemake(repo, workdir)
    return repo, workdir


def manifests(workdir: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in (workdir / "results" / "smoke" / "arms").rglob("*.manifest.json")}


def test_tables_have_rows_per_step_and_phase(smoke):
    _, workdir = smoke
    tables = workdir / "results" / "smoke" / "tables"
    events = pd.read_parquet(tables / "io_events.parquet")
    assert len(events) == len(pd.read_csv(tables / "io_events.csv"))
    summary = pd.read_csv(tables / "step_summary.csv", dtype={"cycle": str})
    # 3 arms x (half cycle: fcst, post + 2 full cycles x 4 steps)
    assert len(summary) == 3 * (2 + 2 * 4)
    assert set(summary["arm"]) == {"lustre", "node_local", "shm"}
    phases = events[events["step"] != "coldstart"].groupby("arm")["phase"].unique().map(set)
    assert phases["lustre"] == {"run", "verify", "replay"}  # the baseline does not stage; its last cycles are paired
    assert phases["shm"] == phases["node_local"] == {"stage_in", "run", "replay", "stage_out", "verify", "cleanup"}
    io = events[events["op"].isin(["read", "write", "copy"])]
    assert (io["MiB_per_s"] > 0).all() and (summary["wall_s"] > 0).all()
    assert summary["io_fraction"].between(0, 1).all()


def test_staging_table_has_every_copy_of_the_staged_arms(smoke):
    _, workdir = smoke
    tables = workdir / "results" / "smoke" / "tables"
    staging = pd.read_csv(tables / "staging.csv", dtype={"cycle": str})
    assert {"method", "dest_tier", "dest_fs_type", "n_files", "bytes", "wall_s", "MiB_per_s"} <= set(staging.columns)
    assert set(staging["arm"]) == {"node_local", "shm"}  # the baseline does not stage
    out = staging[staging["phase"] == "stage_out"].set_index("arm")
    assert set(out["dest_tier"]) == {"lustre"} and (out["bytes"] > 0).all() and (out["MiB_per_s"] > 0).all()
    events = pd.read_parquet(tables / "io_events.parquet")
    copies = events[(events["op"] == "copy") & events["phase"].isin(["stage_in", "stage_out"])]
    assert staging["n_files"].sum() == len(copies) and staging["bytes"].sum() == copies["bytes"].sum()


def test_io_accounting_has_every_job_phase_the_kernel_counted(smoke):
    from cycleio.report.accounting import flagged_sentence

    _, workdir = smoke
    tables = workdir / "results" / "smoke" / "tables"
    accounting = pd.read_csv(tables / "io_accounting.csv", dtype={"cycle": str})
    summary = pd.read_csv(tables / "step_summary.csv", dtype={"cycle": str})
    runs = accounting[accounting["phase"] == "run"]
    assert len(runs) == len(summary)  # one run window per job of the cycles
    staged = accounting[accounting["arm"] != "lustre"].groupby(["arm", "cycle", "step"])["phase"].apply(set)
    assert (staged == {"stage_in", "run", "stage_out", "cleanup"}).all()
    judged = accounting[accounting["kernel_write_bytes"] >= 2**20]
    assert not judged.empty and judged["records_over_kernel_write"].notna().all()
    assert accounting["flagged"].dtype == bool
    flagged = accounting[accounting["flagged"]]
    assert (f"{len(flagged)} flagged" in flagged_sentence(accounting)) or flagged.empty


def test_bytes_equal_file_sizes_on_the_persistent_tier(smoke):
    _, workdir = smoke
    events = pd.read_parquet(workdir / "results" / "smoke" / "tables" / "io_events.parquet")
    for arm in ("lustre", "shm"):
        root = workdir / "results" / "tiers" / "lustre" / "smoke" / arm
        landed = events[(events["arm"] == arm) & (events["tier"] == "lustre") & (events["op"].isin(["write", "copy"]))]
        assert len(landed) > 0
        for row in landed.itertuples():
            assert (root / row.file).stat().st_size == row.bytes, row.file
        on_disk = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        assert on_disk == landed["bytes"].sum()


def test_manifests_list_verified_outputs(smoke):
    _, workdir = smoke
    manifest = json.loads((workdir / "results/smoke/arms/node_local/2027010100/fcst.manifest.json").read_text())
    root = Path(manifest["root"])
    assert manifest["outputs"] and all((root / o["path"]).stat().st_size == o["bytes"] for o in manifest["outputs"])
    assert manifest["provenance"]["tiers"]["scratch"]["tier"] == "node_local"
    assert manifest["provenance"]["slurm_job_id"] == ""  # not a Slurm job (test_slurm: one that is)
    # what the job used, in its manifest (no Snakemake benchmark file per cycled job): the forecast's ranks included
    usage = manifest["usage"]
    assert usage["max_rss_MiB"] > 50 and usage["children_max_rss_MiB"] > 50 and usage["cpu_user_s"] > 0, usage
    assert not (workdir / "results/smoke/benchmarks/node_local").exists()


def test_real_outputs_match_the_study_inventory(smoke):
    _, workdir = smoke
    inventory = pd.read_csv(workdir / "results/smoke/tables/inventory.csv", dtype={"cycle": str})
    checked = 0
    for path in (workdir / "results/smoke/arms").rglob("*.manifest.json"):
        manifest = json.loads(path.read_text())
        assert manifest["step"] != "cleanup"  # the smoke study keeps every cycle
        expected = inventory[(inventory["arm"] == manifest["arm"]) & (inventory["cycle"] == manifest["cycle"])
                             & (inventory["job"] == manifest["step"])].set_index("file")["expected_bytes"]
        written = {o["path"]: o["bytes"] for o in manifest["outputs"]}
        assert set(written) == set(expected.index), path
        for name, size in written.items():  # tiny C12 files: netCDF headers weigh more than at C48
            assert abs(size - expected[name]) <= max(0.15 * expected[name], 64 * 1024), (name, size, expected[name])
        checked += len(written)
    assert checked == len(inventory)


def test_figures_show_the_tables(smoke, tmp_path, drawn_figures):
    """Every figure of the study is a PNG with something drawn, of the size of its figure drawn again here from the
    study's tables by the commands the rules run; every axes of those carries data, and the throughput figure has a
    bar per arm and activity with the table's MiB/s."""
    from cycleio.cli import main
    from cycleio.report.throughputfigure import ACTIVITY_ORDER

    _, workdir = smoke
    figures, tables = workdir / "results/smoke/figures", workdir / "results/smoke/tables"
    names = ["throughput_by_arm_and_phase.png", "write_strategies.png", "benchmark_scaling.png", "fieldio_vs_ior.png",
             "cycle_timeline.png", "io_share_by_step.png", "what_staging_buys.png", "efficiency_heatmap.png",
             "io_gap.png"]
    assert sorted(p.name for p in figures.glob("*.png")) == sorted(names)
    svgs = sorted(p.name for p in figures.glob("*.svg"))  # every figure comes as SVG too
    assert svgs == sorted(n.replace(".png", ".svg") for n in names)
    assert all((figures / svg).stat().st_size > 0 for svg in svgs)
    again = {name: str(tmp_path / name) for name in names}
    assert main(["figures", "--summary", str(tables / "step_summary.csv"),
                 "--throughput", str(tables / "phase_throughput.csv"), "--out", again[names[0]]]) == 0
    assert main(["write-figure", "--events", str(tables / "io_events.parquet"),
                 "--summary", str(tables / "step_summary.csv"), "--out", again[names[1]]]) == 0
    assert main(["bench-figures", "--table", str(tables / "benchmarks.csv"), "--scaling", again[names[2]],
                 "--fits", str(tables / "scaling_fit.csv"), "--fieldio", again[names[3]]]) == 0
    assert main(["timeline", "--events", str(tables / "io_events.parquet"), "--step-summary",
                 str(tables / "step_summary.csv"), "--out-table", str(tmp_path / "timeline.csv"),
                 "--png", again[names[4]], "--share-png", again[names[5]]]) == 0
    assert main(["answer-figures", "--step-summary", str(tables / "step_summary.csv"), "--answers",
                 str(workdir / "results/smoke/summary.csv"), "--efficiency", str(tables / "efficiency.csv"),
                 "--staging-png", again[names[6]], "--heatmap-png", again[names[7]]]) == 0
    assert main(["io-gap-figure", "--io-gap", str(tables / "io_gap.csv"), "--png", again[names[8]]]) == 0
    assert len(drawn_figures) == len(names)
    drawn = dict(zip(names, drawn_figures))
    for name, fig in drawn.items():
        assert_png_drawn(figures / name, tuple(fig.get_size_inches()))
        if name == "efficiency_heatmap.png":  # a colour mesh: a coloured cell per arm x step x direction timed
            efficiency = pd.read_csv(tables / "efficiency.csv")
            assert list(efficiency.columns[-4:]) == ["efficiency_low", "efficiency_high", "timed", "verdict"]
            replays = efficiency[efficiency["reference"] == "replay"]
            # the smoke study's C12 steps move a few MiB: every row against the replay is there, and not timed
            assert len(replays) == len(replays.groupby(["arm", "step", "activity"])) > 0
            assert set(replays["verdict"]) == {"not timed"} and not as_flag(replays["timed"]).any()
            replay = efficiency[(efficiency["reference"] == "replay") & as_flag(efficiency["timed"])]
            cells = np.ma.filled(fig.axes[0].collections[0].get_array(), np.nan)
            assert int(np.isfinite(cells).sum()) == len(replay.groupby(["arm", "step", "activity"]))
        else:
            assert_axes_carry_data(fig)
    throughput = pd.read_csv(tables / "phase_throughput.csv")
    shown = throughput[throughput["activity"].isin(ACTIVITY_ORDER)]
    assert sorted(bar_sizes(drawn[names[0]].axes[0])) == pytest.approx(sorted(shown["MiB_per_s"]))


def test_the_answer_summary_timeline_and_capacity_plan(smoke):
    """The answer layer's files from the smoke run: the summary names each arm and the best one, the timeline has
    every job's phases and the forecasts' output hours per rank, the plan covers every tier measured."""
    _, workdir = smoke
    results = workdir / "results" / "smoke"
    summary = pd.read_csv(results / "summary.csv")
    assert set(summary["arm"]) == {"lustre", "node_local", "shm"} and (summary["n_cycles"] == 2).all()
    assert summary.set_index("arm").loc["lustre", "verdict"] == "baseline"
    assert (summary["cycle_wall_s"] > 0).all() and summary["io_share"].between(0, 1).all()
    text = (results / "summary.md").read_text()
    assert text.startswith("# cycleio study 'smoke'") and "\nBest arm: " in text and "## Capacity plan" in text
    timeline = pd.read_csv(results / "tables" / "cycle_timeline.csv", dtype={"cycle": str})
    steps = pd.read_csv(results / "tables" / "step_summary.csv", dtype={"cycle": str})
    jobs = ["arm", "cycle", "step"]
    assert set(map(tuple, timeline[jobs].values)) == set(map(tuple, steps[jobs].values))
    hours = timeline[timeline["kind"] == "output"]
    assert set(hours["step"]) == {"fcst"} and {"f000", "f003", "f006", "f009"} <= set(hours["what"])
    assert (timeline["t_end"] >= timeline["t_start"]).all()
    # the paired replays (the last two cycles) are drawn, so their place in a job is explained
    replays = timeline[(timeline["kind"] == "phase") & (timeline["what"] == "replay")]
    assert set(replays["cycle"]) == {"2026123118", "2027010100"}
    plan = pd.read_csv(results / "capacity.csv")
    assert set(plan["tier"]) == {"lustre", "node_local", "shm"} and set(plan["resolution"]) == {"C768"}
    cycle = plan[plan["step"] == "cycle"]
    assert (cycle["needed_MiB_per_s"] > 0).all()
    # the smoke study's few-MiB benchmark points are too small to time: no units from them, said so
    assert ((cycle["units_needed"] >= 1) | (cycle["fit"] == "too few timed points")).all()


def test_every_table_has_the_columns_docs_outputs_md_lists(smoke):
    """Each table the study wrote is on docs/outputs.md, with exactly the columns the page lists
    (tests/conftest.py names the tables and columns the smoke study does not write, with why)."""
    _, workdir = smoke
    assert_study_matches_page(workdir / "results" / "smoke")


def test_every_table_has_the_columns_of_the_committed_snapshot(smoke):
    """tests/data/outputs-columns.json, against which test_outputs_doc checks the page in seconds, is still what the
    smoke study writes."""
    _, workdir = smoke
    assert_study_matches_snapshot(workdir / "results" / "smoke")


def test_report_renders_offline_in_chromium_with_every_figure(smoke, tmp_path):
    """The report builds, and headless chromium (Debian's) opens it from a file URL with the network off (its own
    network namespace when root, and no proxy or name resolution in any case): it renders the questions'
    categories, and every figure of the study is in it."""
    chromium = require_tool("chromium", "the report's rendering test opens it in chromium (apt-get install chromium)")
    repo, workdir = smoke
    report = workdir / "results" / "smoke" / "report.html"
    snakemake(repo, workdir, "--report", str(report))
    html = report.read_text()
    figures = sorted(p.name for p in (workdir / "results" / "smoke" / "figures").glob("*.png"))
    assert len(figures) == 9
    for name in figures:
        assert f'"filename": "{name}"' in html and f"data:image/png;charset=utf8;filename={name}" in html, name
    assert "Best arm: " in html  # a caption says the answer in the study's numbers
    # every caption has this study's numbers: none is left "not measured yet", nor failed to read its table
    assert "not measured yet" not in html and "could not read" not in html
    for said in ("timed events.", "the longest step per arm", "no job failed an attempt.", "rows against the replay are timed",
                 "best mean bandwidth per tier", "I/O within 10%", "files in all; a full cycle of arm"):
        assert said in html, said
    offline = ["unshare", "--net"] if os.geteuid() == 0 and shutil.which("unshare") else []
    browser = [*offline, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={tmp_path / 'profile'}", "--proxy-server=127.0.0.1:9",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=5000", "--window-size=1400,1000"]
    url = report.as_uri()
    dom = subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    for category in ("1. The answer", "2. Where does a cycle's time go?", "3. What does staging buy?",
                     "4. How close do the steps come to the tier?", "5. Which write strategy hides the most I/O?",
                     "6. Does it scale, and what would the target need?", "7. Provenance and every record"):
        assert category in dom.stdout, category
    shot = tmp_path / "report.png"
    subprocess.run([*browser, f"--screenshot={shot}", url], capture_output=True, text=True, timeout=120, check=True)
    assert_png_drawn(shot, (1400, 1000), dpi=1)
    shutil.copy(shot, workdir / "results" / "smoke" / "report_screenshot.png")  # to look at


def test_rerun_does_nothing_and_a_deleted_manifest_reruns_only_it_and_dependants(smoke):
    repo, workdir = smoke
    assert "Nothing to be done" in snakemake(repo, workdir, "-n").stdout
    # every job's manifest is a target of the default rule, a cold start's too (not only the steps')
    coldstart = workdir / "results/smoke/arms/lustre/coldstart.manifest.json"
    kept = coldstart.with_name("kept.json")
    shutil.copy2(coldstart, kept)
    coldstart.unlink()
    assert re.search(r"^coldstart +1$", snakemake(repo, workdir, "-n").stdout, re.MULTILINE)
    kept.rename(coldstart)  # its mtime kept: nothing to be done again
    assert "Nothing to be done" in snakemake(repo, workdir, "-n").stdout
    before = manifests(workdir)
    deleted = workdir / "results/smoke/arms/shm/2026123118/anal.manifest.json"
    deleted.unlink()
    # every job's manifest as the targets, so that the tables and figures after them are not redrawn (30 CPU-s)
    snakemake(repo, workdir, targets=sorted(str(path.relative_to(workdir)) for path in before))
    after = manifests(workdir)
    rerun = {p.relative_to(workdir / "results/smoke/arms").as_posix() for p in after if after[p] != before.get(p)}
    assert rerun == {
        "shm/2026123118/anal.manifest.json",
        "shm/2026123118/fcst.manifest.json",
        "shm/2026123118/post.manifest.json",
        "shm/2027010100/prep.manifest.json",
        "shm/2027010100/anal.manifest.json",
        "shm/2027010100/fcst.manifest.json",
        "shm/2027010100/post.manifest.json",
    }


def test_a_changed_launcher_reruns_only_the_forecasts_for_their_params(smoke):
    """Of the cycles' jobs only the forecasts read the launcher (``--list-changes params`` of Snakemake 9.27
    cannot tell: it lists the last output of every job), so only they rerun for their params."""
    repo, workdir = smoke
    (workdir / "launcher.yaml").write_text(yaml.safe_dump({"launcher": "mpiexec -np {ntasks}"}))
    study = repo / "config" / "studies" / "smoke.yaml"
    configs = [str(path) for path in (study, workdir / "tiers.yaml", workdir / "launcher.yaml")]
    dry = snakemake(repo, workdir, "-n", "--configfile", *configs).stdout
    by_params = set(re.findall(r"^Job \d+: (.*)\nReason: Params have changed", dry, re.MULTILINE))
    # Snakemake names one reason per job: the later forecasts' is their inputs (the first forecasts rerun).
    # The benchmark points start their tasks with the launcher too.
    assert {message for message in by_params if " of cycle " in message} == {
        f"fcst of cycle 2026123112, arm {arm}" for arm in ("lustre", "node_local", "shm")}
    # what follows the first forecasts reruns for its inputs; the cold starts and the dumps do not rerun
    assert re.search(r"^cycle_step +30$", dry, re.MULTILINE)
    assert not re.search(r"^(coldstart|obs_dump) ", dry, re.MULTILINE)


def test_bad_config_is_refused_before_any_job_runs(smoke, tmp_path):
    repo, _ = smoke
    (tmp_path / "tiers.yaml").write_text("scratch_tiers: [lustre, nvme]\n")
    result = snakemake(repo, tmp_path, check=False)
    assert result.returncode != 0
    message = result.stdout + result.stderr
    assert "config key 'scratch_tiers[1]': 'nvme' is not a tier; expected one of: lustre, node_local, shm" in message
    assert not (tmp_path / "results").exists()


def test_lint_is_clean(repo):
    result = subprocess.run([str(BIN / "snakemake"), "--lint", "-s", str(repo / "Snakefile")], cwd=repo,
                            capture_output=True, text=True, env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert result.returncode == 0, result.stdout + result.stderr


def test_snakefmt_check_is_clean(repo):
    files = [repo / "Snakefile", *sorted((repo / "rules").glob("*.smk"))]
    result = subprocess.run([str(BIN / "snakefmt"), "--check", *map(str, files)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_killed_run_resumes_and_redoes_only_what_was_unfinished(repo, tmp_path):
    """kill -9 the whole run in the middle of a job; the next run redoes only unfinished jobs (the jobs of the cycles,
    without the benchmarks and the tables, which take no part in it)."""
    import signal
    import time

    shm = Path("/dev/shm") / f"cycleio-test-kill-{os.getpid()}"
    (tmp_path / "tiers.yaml").write_text(yaml.safe_dump({
        "scratch_tiers": ["shm"], "benchmarks": {"enabled": False},
        "tiers": {"shm": {"kind": "memory", "path": str(shm)}},
        "forecast": {"compute_seconds_per_hour": 0.4},  # a forecast job takes about 4 s: time to kill it
    }))
    # the arm's jobs up to its second cycle's post: the tables and figures after them take no part
    last = "results/smoke/arms/shm/2026123118/post.manifest.json"
    cmd = [str(BIN / "snakemake"), last, "-s", str(repo / "Snakefile"), "--cores", "1",
           "--configfile", str(repo / "config" / "studies" / "smoke.yaml"), str(tmp_path / "tiers.yaml")]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    try:
        run = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
        second_fcst_log = tmp_path / "results/smoke/logs/shm/2026123118/fcst.log"
        deadline = time.time() + 300
        while not second_fcst_log.exists() and time.time() < deadline and run.poll() is None:
            time.sleep(0.2)
        job = shm / "smoke" / "shm" / ".job.2026123118.fcst"  # the killed job's scratch folder
        while not any(job.rglob("*atmf*")) and time.time() < deadline and run.poll() is None:
            time.sleep(0.05)  # until the forecast writes its first history file: inside its compute/write loop
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        finished = manifests(tmp_path)
        assert finished and not (tmp_path / "results/smoke/arms/shm/2026123118/fcst.manifest.json").exists()
        assert job.exists()

        subprocess.run([*cmd, "--unlock"], cwd=tmp_path, env=env, check=True, capture_output=True)
        result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr[-3000:]
        after = manifests(tmp_path)
        assert all(after[p] == mtime for p, mtime in finished.items()), "a finished job was redone"
        # the killed fcst of 2026123118 and the post after it
        assert len(after) == len(finished) + 2
        assert not list((shm / "smoke" / "shm").glob(".job.*"))
        persistent = tmp_path / "results/tiers/lustre/smoke/shm"
        assert not [p for p in persistent.rglob("*") if fsutil.is_temporary(p.name)]
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def test_injected_faults_fail_their_attempt_which_is_retried_and_kept_out_of_the_tables(repo, tmp_path):
    """Each fault of the config's ``faults`` fails its job's first attempt; Snakemake retries it (retries: 1),
    the retry succeeds, the failed attempt's records stay beside the job's with attempt 1, and the tables hold
    the successful attempts only. A changed fault reruns its job alone; a bad one is refused before any job."""
    shm = Path("/dev/shm") / f"cycleio-test-faults-{os.getpid()}"
    faults = {
        "fail_step": [{"cycle": "2026123118", "step": "anal"}],
        "fail_rank": [{"cycle": "2026123118", "rank": 1}],  # serial: the rank that never writes
        "corrupt_staged_file": [{"cycle": "2027010100", "step": "post", "phase": "stage_out"}],
        "fail_stage_out": [{"cycle": "2027010100", "step": "prep", "after_files": 1}],
    }
    (tmp_path / "tiers.yaml").write_text(yaml.safe_dump({
        "scratch_tiers": ["shm"], "benchmarks": {"enabled": False},
        "tiers": {"shm": {"kind": "memory", "path": str(shm)}}, "faults": faults,
    }))
    failed = {("2026123118", "anal"): "run", ("2026123118", "fcst"): "run", ("2027010100", "post"): "stage_out",
              ("2027010100", "prep"): "stage_out"}
    try:
        snakemake(repo, tmp_path, "--retries", "1", targets=TABLES)
        arms = tmp_path / "results/smoke/arms/shm"
        for (cycle, step), phase in failed.items():
            (kept,) = (arms / cycle / f"{step}.failed-attempts").glob("attempt1.*.records.jsonl")
            records = [json.loads(line) for line in kept.read_text().splitlines()]
            assert {r["attempt"] for r in records} == {1}, kept
            assert [r["phase"] for r in records if r["op"] == "failed"] == [phase], kept
            retried = [json.loads(line) for line in (arms / cycle / f"{step}.records.jsonl").read_text().splitlines()]
            assert {r["attempt"] for r in retried} == {2}
        assert len(list(arms.rglob("*.failed-attempts"))) == len(failed)  # no other job failed
        tables = tmp_path / "results/smoke/tables"
        events = pd.read_parquet(tables / "io_events.parquet")
        assert "failed" not in set(events["op"])
        retried = events.set_index(["cycle", "step"]).index.isin(list(failed))
        assert set(events.loc[retried, "attempt"]) == {2} and set(events.loc[~retried, "attempt"]) == {1}
        summary = pd.read_csv(tables / "step_summary.csv", dtype={"cycle": str})
        assert len(summary) == 2 + 2 * 4  # one row per job, its successful attempt
        retries = pd.read_csv(tables / "retries.csv", dtype={"cycle": str})  # the report's view of them
        assert {(r.cycle, r.step): r.failed_in_phase for r in retries.itertuples()} == failed
        assert set(retries["attempt"]) == {1} and set(retries["succeeded_on_attempt"]) == {2}
        persistent = tmp_path / "results/tiers/lustre/smoke/shm"
        post = json.loads((arms / "2027010100/post.manifest.json").read_text())
        assert all(checksums.checksum_file(persistent / o["path"]) == o["xxh3_64"] for o in post["outputs"])
        assert not [p for p in persistent.rglob("*") if fsutil.is_temporary(p.name)]
        assert "Nothing to be done" in snakemake(repo, tmp_path, "-n", targets=TABLES).stdout

        # one more fault: only the job it aims at reruns for its params
        (tmp_path / "more.yaml").write_text(yaml.safe_dump({"faults": {
            **faults, "fail_step": [*faults["fail_step"], {"cycle": "2027010100", "step": "post", "attempt": 2}]}}))
        configs = [str(repo / "config/studies/smoke.yaml"), str(tmp_path / "tiers.yaml"), str(tmp_path / "more.yaml")]
        dry = snakemake(repo, tmp_path, "-n", "--configfile", *configs, targets=TABLES).stdout
        assert set(re.findall(r"^Job \d+: (.*)\nReason: Params have changed", dry, re.MULTILINE)) == {
            "post of cycle 2027010100, arm shm"}

        (tmp_path / "bad.yaml").write_text(yaml.safe_dump({"faults": {"fail_rank": [{"cycle": "2027010106", "rank": 0}]}}))
        configs[-1] = str(tmp_path / "bad.yaml")
        result = snakemake(repo, tmp_path, "-n", "--configfile", *configs, check=False)
        assert result.returncode != 0
        assert ("config key 'faults.fail_rank[0].cycle': 2027010106 is not a cycle of the study "
                "(2026123112 to 2027010100)") in result.stdout + result.stderr
    finally:
        shutil.rmtree(shm, ignore_errors=True)
