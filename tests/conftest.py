"""Shared fixtures. In CI (CI=true) a test whose tool is missing fails instead of skipping."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
try:
    import cycleio  # noqa: F401
except ImportError:  # running without `pip install -e .`
    sys.path.insert(0, str(REPO / "scripts"))

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# As `make test` runs them: the venv's tools (the mpich wheel's mpiexec) first on PATH, also when pytest is
# started as .venv/bin/python -m pytest; else Debian's /usr/bin/mpiexec (Open MPI, present with the
# parallel stack) would start the mpich-linked ranks.
_VENV_BIN = str(Path(sys.executable).parent)
if os.environ.get("PATH", "").split(os.pathsep)[0] != _VENV_BIN:
    os.environ["PATH"] = os.pathsep.join(filter(None, [_VENV_BIN, os.environ.get("PATH")]))

# The fixtures that start MPI ranks: their tests are marked ``mpi`` (make test runs them, make test-fast does not)
MPI_FIXTURES = frozenset({"mpiexec", "parallel_python"})


# Tools in no package registry, so CI (which installs only from them) cannot have them: marker -> (the command it
# needs, what the summary line says of it).
UNREGISTERED_TOOLS = {
    "ior": ("ior", "no IOR on PATH (IOR is in no package registry; its command lines and parser are tested as units)"),
    "darshan": ("darshan-parser", "no darshan-parser on PATH (darshan-util is in no package registry; the logs a "
                                  "real darshan-runtime wrote are tested as fixtures, tests/data/darshan)"),
}


# make test runs the e2e part with --dist loadgroup, in the groups group_of gives (pytest_xdist_make_scheduler: xdist
# 3.8 groups by xdist_group marks through item._nodeid, which pytest 9 no longer reads). The tests of a group run on
# one worker, one after the other. A file is a group (its tests share the studies and clusters of its module-scoped
# fixtures); OWN_GROUP gives a test with a study of its own a group of its own, SAME_GROUP puts files together, and
# ONE_BY_ONE spreads a file's tests. The groups start longest first, by SECONDS (of setup and calls, from --durations
# on the 2-core machine under load: only their order counts), then the tests one by one, so that the workers end
# together instead of one running a long group alone at the end.
SAME_GROUP = {
    "test_slurm.py": "slurm", "test_slurm_multinode.py": "slurm",  # both hold the Slurm lock: the other worker waited
    "test_parallel_io.py": "parallel-stack", "test_install.py": "parallel-stack",  # both build the stack if missing
}
OWN_GROUP = {
    "test_a_killed_run_resumes_and_redoes_only_what_was_unfinished": "workflow-killed-run",
    "test_injected_faults_fail_their_attempt_which_is_retried_and_kept_out_of_the_tables": "workflow-faults",
}
ONE_BY_ONE = {"test_docs.py"}  # its e2e tests are dry runs that share nothing
# Groups that mostly wait (for Slurm to start a job, for Snakemake's Slurm executor to see it end): with three workers
# or more the last worker runs these alone and the others every other group, so the waits overlap the busy groups
# instead of holding one of the two workers a 2-core machine keeps busy.
WAITING = {"slurm"}
SECONDS = {"slurm": 900, "test_workflow.py": 400, "parallel-stack": 310, "test_archive_workflow.py": 210,
           "test_bad_input.py": 180, "test_gluster.py": 110, "workflow-faults": 100, "test_two_checkouts.py": 90,
           "test_darshan_workflow.py": 85, "workflow-killed-run": 45}


def group_of(nodeid: str) -> str:
    """The group of the test with this node id: OWN_GROUP's, SAME_GROUP's, its file's, or (ONE_BY_ONE) its own."""
    path, _, name = nodeid.partition("::")
    file = path.rsplit("/", 1)[-1]
    if name.split("[", 1)[0] in OWN_GROUP:
        return OWN_GROUP[name.split("[", 1)[0]]
    return nodeid if file in ONE_BY_ONE else SAME_GROUP.get(file, file)


def longest_first(config, items) -> None:
    """Under --dist loadgroup, the items by group: the groups by SECONDS, longest first, then the tests one by one
    (small, they fill the end); a group's items in their order. The workers collect in this order and the scheduler
    hands out groups in it."""
    # an xdist worker has dist "no" and option.loadgroup set (xdist.remote.setup_config)
    if config.getoption("dist", "no") != "loadgroup" and not getattr(config.option, "loadgroup", False):
        return
    order: dict[str, int] = {}
    for item in items:
        order.setdefault(group_of(item.nodeid), len(order))

    def key(item):
        group = group_of(item.nodeid)
        return group == item.nodeid, -SECONDS.get(group, 0), order[group]

    items.sort(key=key)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup: xdist's scheduler of groups, with group_of's groups, handed out in the order the workers
    collected them (longest_first), not reordered by their number of tests."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class Groups(LoadGroupScheduling):
        waited = False  # the waiting worker has had a WAITING group

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

        def _reschedule(self, node) -> None:
            # a worker holds its last test until it is sent more or shut down: more only then, so that no group
            # waits behind another worker's tests while a worker is free
            if not node.shutting_down and self._pending_of(self.assigned_work[node]) <= 1:
                self._assign_work_unit(node)

        def _assign_work_unit(self, node) -> None:
            """The next group for this worker (WAITING's on the last of three or more workers, every other group on
            the others, and a WAITING group no waiting worker takes), or its shutdown when none is left. Once its
            WAITING groups are done, the waiting worker takes the others' too: the two busy workers had the machine
            to themselves until then, and the groups left at the end finish sooner on three."""
            waiting_worker = self.nodes[-1] if len(self.nodes) >= 3 else None
            if node is waiting_worker:
                fits = [scope for scope in self.workqueue if scope in WAITING]
                if fits:
                    self.waited = True
                elif self.waited:
                    fits = list(self.workqueue)
            else:
                fits = [scope for scope in self.workqueue if scope not in WAITING]
                if not fits and (waiting_worker is None or waiting_worker.shutting_down):
                    fits = list(self.workqueue)
            if not fits:
                if not node.shutting_down:
                    node.shutdown()
                return
            work_unit = self.workqueue.pop(fits[0])
            self.assigned_work.setdefault(node, {})[fits[0]] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

    config.option.loadscopereorder = False
    return Groups(config, log)


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection reads the marks
def pytest_collection_modifyitems(config, items):
    """Marks every test that uses an MPI fixture ``mpi``. IOR and darshan-util are in no package registry, so CI
    (which installs only from them) cannot have them: there their tests (marked ``ior``, ``darshan``) are
    deselected, counted in pytest's summary and named in a line of their own, not skipped and not dropped unseen;
    anywhere else a missing tool is a skip (require_tool). Under --dist loadgroup, orders the tests by group
    (longest_first)."""
    for item in items:
        if MPI_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.mpi)
    longest_first(config, items)
    if not IN_CI:
        return
    config._cycleio_deselected = {}
    for marker, (command, _) in UNREGISTERED_TOOLS.items():
        if shutil.which(command):
            continue
        chosen = [item for item in items if item.get_closest_marker(marker)]
        if chosen:
            items[:] = [item for item in items if item not in chosen]
            config.hook.pytest_deselected(items=chosen)
            config._cycleio_deselected[marker] = [item.nodeid for item in chosen]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for marker, deselected in getattr(config, "_cycleio_deselected", {}).items():
        terminalreporter.write_line(f"not run, {UNREGISTERED_TOOLS[marker][1]}: {', '.join(deselected)}")


def cannot_run_here(reason: str) -> None:
    """Skip outside CI; in CI (CI=true), where nothing may skip, fail with the reason."""
    if IN_CI:
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def require_tool(name: str, why: str) -> str:
    """Path of a tool the test needs; skip outside CI when it is missing, fail in CI."""
    path = shutil.which(name) or (shutil.which(name, path=str(Path(sys.executable).parent)))
    if path:
        return path
    cannot_run_here(f"{name} not found on PATH; {why}")


# One localhost Slurm at a time: ci/slurm/start.sh restarts a cluster of another shape, so the test modules
# that start one (test_slurm.py: one node; test_slurm_multinode.py: three) hold this lock while theirs is up.
SLURM_LOCK = Path("/var/lock/cycleio-ci-slurm.lock")



def slurm_installed(tool: str, why: str) -> None:
    """What a localhost Slurm test needs before it starts a cluster: root, ``tool``, and ci/slurm/install.sh done
    (skipped outside CI, failed in CI, when any is missing)."""
    if os.geteuid() != 0:
        cannot_run_here("bringing up a localhost Slurm (ci/slurm/start.sh) needs root")
    require_tool(tool, why)
    install = subprocess.run(["bash", str(Path(__file__).resolve().parents[1] / "ci" / "slurm" / "install.sh")],
                             capture_output=True, text=True, timeout=900)
    if install.returncode != 0:
        cannot_run_here(f"ci/slurm/install.sh failed:\n{install.stdout[-3000:]}{install.stderr[-3000:]}")


@contextlib.contextmanager
def slurm_cluster_lock():
    """Held while a test module's localhost Slurm is up; another module's waits for it."""
    SLURM_LOCK.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(SLURM_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@pytest.fixture
def disk_dir(tmp_path):
    """A folder on a file system whose pages can be dropped: the test's tmp_path, or where that is memory
    (tmpfs /tmp) one under the repository's results/; skips (fails in CI) where both are memory."""
    from cycleio.storage.pagecache import memory_backed
    from cycleio.storage.tiers import probe_tier

    for base in (tmp_path, REPO / "results"):
        if not memory_backed("posix", probe_tier(base)["fs_type"]):
            path = base / f"cycleio-test-pagecache-{os.getpid()}"
            path.mkdir()
            yield path
            shutil.rmtree(path, ignore_errors=True)
            return
    message = f"{tmp_path} and {REPO / 'results'} are both memory: no page cache to drop there"
    if IN_CI:
        pytest.fail(f"CI=true and {message}")
    pytest.skip(message)


@pytest.fixture
def repo() -> Path:
    return REPO


@functools.cache
def _default_config() -> dict:
    import yaml

    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


@pytest.fixture
def default_config() -> dict:
    """config/config.yaml as a dict of the test's own (read once a session: 50 ms each read)."""
    import copy

    return copy.deepcopy(_default_config())


def with_changes(config: dict, **changes) -> dict:
    """A deep copy of config with keys replaced; nested keys are joined by __ (cycles__end=...)."""
    import copy

    out = copy.deepcopy(config)
    for dotted, value in changes.items():
        target = out
        *parents, last = dotted.split("__")
        for key in parents:
            target = target[key]
        target[last] = value
    return out


# ------------------------------------------------------------------------------------------------ cycleio here


def cycleio_in_process(argv: Sequence[str]) -> subprocess.CompletedProcess:
    """``cycleio ARGV`` run in this process (a second Python would spend its seconds importing what this one has):
    its exit code (argparse's after --help or an error) and output. The logging a command sets up is undone after."""
    import io
    import logging

    from cycleio.cli import main

    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level, excepthook = root.handlers[:], root.level, sys.excepthook
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(argv))
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        sys.excepthook = excepthook
    return subprocess.CompletedProcess(list(argv), code, out.getvalue(), err.getvalue())


# ------------------------------------------------------------------------------------------------ Snakemake runs


def snakemake(repo: Path, workdir: Path, *args: str, check: bool = True, study: str = "smoke",
              targets: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """A study of config/studies (the smoke study unless named; with workdir/tiers.yaml laid over it) through the
    venv's snakemake, run in workdir; targets instead of rule all's (before the options: --configfile takes every
    word after it)."""
    bin_dir = Path(sys.executable).parent
    cmd = [str(bin_dir / "snakemake"), *targets, "-s", str(repo / "Snakefile"), "--cores", "2",
           "--configfile", str(repo / "config" / "studies" / f"{study}.yaml"), str(workdir / "tiers.yaml"), *args]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, env=env, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"snakemake failed ({result.returncode}):\n{result.stdout[-3000:]}\n"
                             f"{result.stderr[-5000:]}")
    return result


# ------------------------------------------------------------------------------------------------ cold starts


@pytest.fixture(scope="session")
def lay_cold_start(tmp_path_factory):
    """A function laying an arm's cold start (initial conditions and bias files) onto its persistent tier.

    Each distinct cold start (seed, grid, start, compression) is written once a session by run_coldstart and
    copied after: for tests of the jobs that follow it. Tests of the cold-start job itself run it.
    """
    import dataclasses
    import shutil

    from cycleio.config.tierspec import Tier
    from cycleio.runner.persistentjobs import run_coldstart

    written: dict[tuple, Path] = {}

    def lay(settings) -> None:
        key = (settings.seed, settings.resolution, settings.levels, settings.start, settings.compression)
        if key not in written:
            base = tmp_path_factory.mktemp("cold-start")
            once = dataclasses.replace(settings, study="cold", arm="start",
                                       persistent=Tier("cold", "posix", str(base / "tier")))
            run_coldstart(once, base / "records.jsonl", base / "manifest.json")
            written[key] = base / "tier" / "cold" / "start"
        shutil.copytree(written[key], Path(settings.persistent.path) / settings.study / settings.arm,
                        dirs_exist_ok=True)

    return lay


# ------------------------------------------------------------------------------------------------ a hand-made study

# The step_summary table test_report_answers works out by hand and test_compare compares with a changed copy of.
C0, C1, C2 = "2026010100", "2026010106", "2026010112"
# per arm and cycle: wall seconds of prep, anal, fcst, post (C0 is the half cycle: fcst, post)
WALLS = {
    "lustre": {C0: (None, None, 4, 1), C1: (1, 2, 4, 1), C2: (1, 2, 5, 1)},  # 8, 9: mean 8.5
    "shm": {C0: (None, None, 3, 1), C1: (1, 1, 3, 1), C2: (1, 1, 3, 1.5)},  # 6, 6.5: saves 2 and 2.5
    "node_local": {C0: (None, None, 3, 1), C1: (1, 2, 4.5, 1), C2: (1, 2, 4, 1)},  # 8.5, 8: saves -0.5 and 1
}


def step_summary():
    """The hand-made study's step_summary table (a pandas DataFrame)."""
    import pandas as pd

    rows = []
    for arm, cycles in WALLS.items():
        for cycle, walls in cycles.items():
            for step, wall in zip(("prep", "anal", "fcst", "post"), walls):
                if wall is None:
                    continue
                staging = 0.25 if arm != "lustre" else 0.0
                rows.append({"study": "fx", "arm": arm, "cycle": cycle, "step": step, "wall_s": wall,
                             "io_s": 2.0 if step == "fcst" else 0.0, "staging_s": staging})
        rows.append({"study": "fx", "arm": arm, "cycle": C2, "step": "cleanup", "wall_s": 100.0, "io_s": 100.0,
                     "staging_s": 0.0})  # an older cycle's cleanup: no cycle's forecast
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------- the forecast under MPI
# test_launcher (the serial, per_rank and quilt strategies) and test_parallel_io (the shared-file ones) run the same
# short forecast and hold every strategy's files to the same reference.

FCST_CYCLE = "2026010106"
FCST_START = "2026010100"
# A hang bound, not a speed bound: 4 Open MPI ranks on 2 cores beside other CPU-bound work wait in HDF5's collectives
# (the ranks yield their core when oversubscribed and get little of it back): the 4-rank test forecast took 4.6 s
# alone and 116-148 s beside three busy loops. A hang at MPI's start-up is caught sooner (process.startup_timeout).
FCST_TIMEOUT_S = 300


def short_forecast():
    """A short forecast: outputs at 0, 3 and 6 h, one restart set at 6 h."""
    from cycleio.config.forecast import ForecastSettings

    return ForecastSettings(forecast_hours=6, history_interval_hours=3, restart_hours=(6,))


@pytest.fixture
def forecast_dir():
    """A folder for a forecast's files, on /dev/shm where it exists so that fsync does not dominate the tiny files."""
    import tempfile

    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    path = Path(tempfile.mkdtemp(prefix="cycleio-mpifcst-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def forecast_arm(strategy: str, ranks: int = 2, levels: int = 3, compute_s: float = 0.0, **write_component):
    """The ArmSettings of a C12 arm on /dev/shm writing with a strategy and ranks."""
    from cycleio.config.settings import ArmSettings
    from cycleio.config.tierspec import Tier
    from cycleio.config.forecast import Compression

    tier = Tier("shm", "memory", "/dev/shm")
    return ArmSettings(study="t", arm=strategy, start=FCST_START, seed=11, resolution="C12", levels=levels,
                       persistent=tier, scratch=tier, strategy=strategy, forecast=short_forecast(),
                       compression=Compression(zlib_level=1, quantize_nsd=7), compute_seconds_per_hour=compute_s,
                       write_component={"ranks": ranks, **write_component})


def forecast_context(arm):
    from cycleio.surrogates.grid import Grid
    from cycleio.surrogates.context import WriteContext

    return WriteContext(Grid(arm.resolution, arm.levels), arm.seed, FCST_CYCLE, arm.compression)


def fcst_writes():
    from cycleio.surrogates.inventory import step_io

    return step_io("fcst", FCST_CYCLE, FCST_START, short_forecast()).writes


def sampled_writes():
    """The forecast's files with tile 1 of each restart kind, but all six tiles of fv_core.res: with fewer than six
    compute ranks every tile is split alike (tile_blocks), so the other tiles add files, not cases."""
    from cycleio.surrogates.kinds import TILE_LAYOUTS

    return [spec for spec in fcst_writes()
            if spec.kind not in TILE_LAYOUTS or spec.kind == "fv_core.res" or ".tile1." in spec.path]


def run_forecast(arm, root: Path, writes=None, fail_rank: int | None = None, info: dict | None = None) -> list[dict]:
    """The forecast's writes (all, or those given) as an MPI program under the arm's launcher; its records."""
    from cycleio.surrogates.forecast.launcher import run_forecast_mpi

    return run_forecast_mpi(arm, FCST_CYCLE, root, fcst_writes() if writes is None else writes, forecast_context(arm),
                            timeout=FCST_TIMEOUT_S, label="[test]", fail_rank=fail_rank, info=info)


def assert_same_files(reference: Path, other: Path) -> None:
    """Both folders hold the same files, netCDF files with the same data (compared with xarray), others byte for
    byte."""
    import xarray as xr

    ref = sorted(p.relative_to(reference) for p in reference.rglob("*") if p.is_file())
    got = sorted(p.relative_to(other) for p in other.rglob("*") if p.is_file())
    assert got == ref, f"files differ: {sorted(set(map(str, got)) ^ set(map(str, ref)))[:5]}"
    for rel in ref:
        if rel.suffix == ".nc":
            with xr.open_dataset(reference / rel, decode_times=False) as a, \
                    xr.open_dataset(other / rel, decode_times=False) as b:
                xr.testing.assert_identical(a, b)
        else:
            assert (reference / rel).read_bytes() == (other / rel).read_bytes(), rel


@pytest.fixture(scope="module")
def forecast_reference(tmp_path_factory):
    """The forecast's files written in process by writers.write_file, the writer every strategy must match."""
    from cycleio.surrogates.writers import write_file

    root = tmp_path_factory.mktemp("reference")
    arm = forecast_arm("serial")
    ctx = forecast_context(arm)
    for spec in sampled_writes():
        write_file(root / spec.path, spec, ctx)
    return root


# ------------------------------------------------------------------------------------------------ figures

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FIGURE_DPI = 120  # what the figure modules save with


@pytest.fixture
def drawn_figures(monkeypatch) -> list:
    """Every matplotlib Figure the code under test makes with plt.subplots, to look at its axes after saving.

    The figure modules call ``plt.subplots`` through the pyplot module, so recording it there catches them all;
    a closed figure keeps its axes and artists.
    """
    import matplotlib.pyplot as plt

    figures = []
    subplots = plt.subplots

    def recording(*args, **kwargs):
        fig, axes = subplots(*args, **kwargs)
        figures.append(fig)
        return fig, axes

    monkeypatch.setattr(plt, "subplots", recording)
    return figures


def assert_png_drawn(path: Path, size_inches: tuple[float, float] | None, dpi: int = FIGURE_DPI,
                     min_inked: float = 0.03):
    """The file is a PNG of the figure's size in pixels (when given), and not blank: some share of its pixels
    differ from the background (the corner pixel) by more than anti-aliasing noise. Returns the decoded pixels."""
    import numpy as np
    from matplotlib import image

    assert path.read_bytes()[:8] == PNG_MAGIC, f"{path} is not a PNG"
    pixels = image.imread(path)
    if size_inches is not None:
        width, height = (round(inches * dpi) for inches in size_inches)
        shown = f"{pixels.shape[1]}x{pixels.shape[0]}"
        assert pixels.shape[:2] == (height, width), f"{path}: {shown} px, not {width}x{height}"
    rgb = pixels[..., :3]
    inked = float(np.any(np.abs(rgb - rgb[0, 0]) > 0.1, axis=-1).mean())
    assert inked >= min_inked, f"{path} is nearly blank: {inked:.1%} of its pixels differ from the background"
    return pixels


def drawn_bars(ax) -> list:
    """The axes' bars (Rectangle patches) that show a value: finite and of nonzero width and height."""
    import math

    from matplotlib.patches import Rectangle

    return [p for p in ax.patches if isinstance(p, Rectangle)
            and all(math.isfinite(v) and v != 0 for v in (p.get_width(), p.get_height()))]


def bar_sizes(ax, horizontal: bool = False) -> list[float]:
    """Heights of the axes' bars left to right, or for barh their widths top to bottom (in data coordinates)."""
    bars = drawn_bars(ax)
    if horizontal:
        return [p.get_width() for p in sorted(bars, key=lambda p: p.get_y())]
    return [p.get_height() for p in sorted(bars, key=lambda p: p.get_x())]


def assert_axes_carry_data(fig) -> None:
    """Every axes of the figure shows data, bars or lines with finite points, or says in words that there is none
    (a text starting "no "); an axes turned off is a panel of words beside the data and must hold some."""
    import numpy as np

    assert fig.axes, "the figure has no axes"
    for ax in fig.axes:
        if not ax.axison:
            assert any(t.get_text().strip() for t in ax.texts), "a panel of words holds none"
            continue
        lines = [line for line in ax.get_lines() if np.isfinite(np.asarray(line.get_ydata(), float)).any()]
        said = [t.get_text() for t in ax.texts if t.get_text().startswith("no ")]
        assert drawn_bars(ax) or lines or said, f"axes {ax.get_title()!r} shows no data"


@contextlib.contextmanager
def tmpfs(path: Path, size: str, readonly: bool = False):
    """A real tmpfs of a given size (needs root and mount); skips outside CI when it cannot mount."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if readonly else "")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        cannot_run_here(f"cannot mount a tmpfs here ({result.stderr.strip()}); needs root")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


# ------------------------------------------------------------------------------------------------ benchmark points


def point_settings(benchmark: str, tier, spec, tasks: int = 2, repetitions: int = 2, tool: str = "fio"):
    """A benchmark point's settings (cycleio.benchmarks.tierbench.PointSettings) for a tier and an IOR pattern."""
    from dataclasses import asdict

    from cycleio.benchmarks import tierbench as tb

    return tb.PointSettings(study="t", benchmark=benchmark, tier=tier, pattern=getattr(spec, "name", "fields"),
                            spec=asdict(spec), tasks=tasks, repetitions=repetitions, tool=tool)


@pytest.fixture
def small_blocks(monkeypatch):
    """1 MiB checksum blocks, so multi-block (parallel) copies happen with small files."""
    from cycleio.storage import checksums, staging

    monkeypatch.setattr(checksums, "BLOCK_BYTES", 2**20)
    monkeypatch.setattr(staging, "BLOCK_BYTES", 2**20)


def make_files(folder: Path) -> dict[str, bytes]:
    """A staging batch's sources: one file of several blocks, an empty one and twenty small ones."""
    folder.mkdir(parents=True, exist_ok=True)
    contents = {"big.nc": os.urandom(5 * 2**20 + 123), "empty": b"", **{f"obs{i}.bufr": os.urandom(1000 + i) for i in range(20)}}
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    return contents


def no_temporaries(folder: Path) -> bool:
    from cycleio import fsutil

    return not [p for p in folder.rglob("*") if fsutil.is_temporary(p.name)]


# ------------------------------------------------------------------------------- hand-made efficiency and io_gap
# Small efficiency.csv and io_gap.csv tables, as the rules' commands read them back: test_closeness reads them as
# sentences and counts, test_answerfigures draws them.

MiB = 2**20
NAN = math.nan
AT, NOISE, SLOWER, FASTER, NOT_TIMED = ("at the tier's speed", "within noise", "slower than the tier",
                                        "faster than the replay", "not timed")
# arm, tier, step, activity, efficiency, low, high, timed, verdict
REPLAYS = [
    ("lustre", "lustre", "prep", "run:read", 3.0, 2.0, 4.0, False, NOT_TIMED),
    ("lustre", "lustre", "prep", "run:write", 0.2, 0.1, 0.3, False, NOT_TIMED),
    ("lustre", "lustre", "anal", "run:read", 0.98, 0.93, 1.04, True, AT),
    ("lustre", "lustre", "anal", "run:write", 1.01, 0.99, 1.03, True, AT),
    ("lustre", "lustre", "fcst", "run:read", 1.00, 0.95, 1.06, True, AT),
    ("lustre", "lustre", "fcst", "run:write", 0.71, 0.65, 0.78, True, SLOWER),
    ("lustre", "lustre", "post", "run:read", 0.80, 0.71, 1.04, True, NOISE),
    ("lustre", "lustre", "post", "run:write", 1.02, 0.98, 1.05, True, AT),
    ("shm", "shm", "prep", "run:write", 9.0, 5.0, 12.0, False, NOT_TIMED),
    ("shm", "shm", "fcst", "run:write", 1.6, 1.4, 1.8, True, FASTER),
    ("shm", "shm", "post", "run:write", 0.7, 0.5, 1.3, True, NOISE),
]


def markdown_rows(text: str) -> list[tuple[str, ...]]:
    """The rows of the Markdown tables in ``text``, each a tuple of its cells as written (padding stripped)."""
    return [tuple(cell.strip() for cell in line.strip()[1:-1].split("|"))
            for line in text.splitlines() if line.startswith("|")]


def through_csv(frame):
    """The table as the rules' commands read it back."""
    import io

    import pandas as pd

    text = io.StringIO()
    frame.to_csv(text, index=False)
    text.seek(0)
    return pd.read_csv(text)


def efficiency_fixture():
    """A hand-made efficiency.csv: the REPLAYS rows and one row against a pattern."""
    import pandas as pd

    rows = [{"study": "fx", "arm": arm, "tier": tier, "step": step, "activity": activity, "reference": "replay",
             "surrogate_bytes": 64 * MiB if timed else MiB, "efficiency": eff, "reference_repetitions": 5,
             "efficiency_low": low, "efficiency_high": high, "timed": timed, "verdict": verdict}
            for arm, tier, step, activity, eff, low, high, timed, verdict in REPLAYS]
    rows.append({**rows[5], "reference": "easy, best", "efficiency": 0.1, "verdict": SLOWER})  # not a replay
    return through_csv(pd.DataFrame(rows))
GAP_COLUMNS = ["study", "arm", "tier", "step", "direction", "jobs", "files_per_job", "bytes_per_job", "step_s",
               "replay_s", "replay_s_low", "replay_s_high", "best_reference", "best_tool", "best_MiB_per_s",
               "tier_best_s", "pattern_s", "pattern_s_low", "pattern_s_high", "cycleio_s", "cycleio_s_low",
               "cycleio_s_high", "timed"]


def io_gap_fixture():
    """A hand-made io_gap.csv of five steps and directions."""
    import pandas as pd

    rows = [
        # the example: the pattern's band rounds to its value, cycleio's does not
        ("lustre", "lustre", "fcst", "write", 2, 38, 1265 * MiB, 6.0, 5.6, 5.3, 5.9, "easy, 2 tasks", "fio", 361.0,
         3.5, 2.1, 2.08, 2.12, 0.4, 0.1, 0.7, True),
        ("lustre", "lustre", "fcst", "read", 2, 12, 400 * MiB, 2.0, 1.9, 1.8, 2.0, "easy, 2 tasks", "fio", 800.0,
         0.5, 1.4, 1.3, 1.5, 0.1, 0.0, 0.2, True),
        # the most seconds of all, but not timed: never picked
        ("lustre", "lustre", "prep", "write", 2, 500, 1 * MiB, 10.0, 0.1, 0.1, 0.1, "easy, 2 tasks", "fio", 361.0,
         0.003, 0.1, 0.1, 0.1, 9.9, 9.9, 9.9, False),
        # the tier's best pattern not measured on shm
        ("shm", "shm", "fcst", "write", 2, 38, 1265 * MiB, 1.2, 0.9, 0.8, 1.0, NAN, NAN, NAN,
         NAN, NAN, NAN, NAN, 0.3, 0.2, 0.4, True),
        # the step faster than its replay: cycleio's part is negative
        ("shm", "shm", "post", "write", 2, 24, 300 * MiB, 0.5, 0.6, 0.55, 0.65, NAN, NAN, NAN,
         NAN, NAN, NAN, NAN, -0.1, -0.15, -0.05, True),
    ]
    return through_csv(pd.DataFrame([("fx", *row) for row in rows], columns=GAP_COLUMNS))


# ------------------------------------------------------------------------------------------------ the checked-in study
# The study ``fx`` of tests/data, made by tests/data/make_fixtures.py (run it after changing it; test_fixture_study
# checks the files are what it writes): records and manifests in records/, benchmark points in points/. Arms
# ``lustre`` (the baseline, on the persistent tier, every offset and duration twice the staged arm's) and ``shm``
# (staged); cycles C0 (half: fcst, post after the cold start) and C1 (dump, prep, fcst, post). Times are multiples of
# 1/64 s and sizes whole MiB: test_aggregate, test_benchtables and the figure tests work every expected number out
# by hand from the records, with offsets from the job's start.

FX_DATA = REPO / "tests" / "data"
FX_RECORDS, FX_POINTS = FX_DATA / "records", FX_DATA / "points"
FX_T0 = 1_795_392_000.0  # the first cycle's prep, fcst, post start 10, 20, 40 s after it; the second's 100 s later
FX_ARMS = ("lustre", "shm")


def record_files() -> list[Path]:
    """Every job's records in the order the workflow passes them (rules/common.smk all_job_files)."""
    files = [FX_RECORDS / "arms" / arm / "coldstart.records.jsonl" for arm in FX_ARMS]
    files += [FX_RECORDS / "arms" / arm / C1 / "dump.records.jsonl" for arm in FX_ARMS]
    for cycle, steps in ((C0, ("fcst", "post")), (C1, ("prep", "fcst", "post"))):
        files += [FX_RECORDS / "arms" / arm / cycle / f"{step}.records.jsonl" for arm in FX_ARMS for step in steps]
    return files


def point_files() -> list[Path]:
    """Every benchmark point's CSV, as cycleio bench writes them."""
    return sorted(FX_POINTS.rglob("*.csv"))


@pytest.fixture(scope="session")
def tables(tmp_path_factory) -> Path:
    """The study's tables (io_events, step_summary, phase_throughput, staging, tiers) as aggregate writes them."""
    from cycleio.report.aggregate import StudyTables, aggregate

    out = tmp_path_factory.mktemp("fx") / "tables"
    records = record_files()
    manifests = [p.with_name(p.name.replace(".records.jsonl", ".manifest.json")) for p in records]
    aggregate(records, StudyTables(events=out / "io_events.parquet", events_csv=out / "io_events.csv",
                                   summary=out / "step_summary.csv", throughput=out / "phase_throughput.csv",
                                   staging=out / "staging.csv", tiers=out / "tiers.csv"),
              [p for p in manifests if p.exists()])
    return out


def read_csv(tables: Path, name: str):
    """One of the tables, its cycles as strings."""
    import pandas as pd

    return pd.read_csv(tables / name, dtype={"cycle": str})


def row_of(frame, **keys):
    """The one row of the frame with these values."""
    import pandas as pd

    mask = pd.Series(True, index=frame.index)
    for column, value in keys.items():
        mask &= frame[column] == value
    assert mask.sum() == 1, f"{mask.sum()} rows for {keys}"
    return frame[mask].iloc[0]


@pytest.fixture(scope="session")
def efficiency(tables, tmp_path_factory):
    """The study's efficiency.csv from its benchmark points and io_events, as write_benchmark_tables writes it."""
    import pandas as pd

    from cycleio.report.benchtables import write_benchmark_tables

    out = tmp_path_factory.mktemp("bench")
    write_benchmark_tables(point_files(), tables / "io_events.parquet", benchmarks_csv=out / "benchmarks.csv",
                           benchmarks_parquet=out / "benchmarks.parquet", efficiency=out / "efficiency.csv",
                           io_gap=out / "io_gap.csv")
    return pd.read_csv(out / "efficiency.csv")


@pytest.fixture(scope="session")
def bench():
    """The benchmarks table of the study's points."""
    from cycleio.report.benchtables import benchmark_table, load_points

    return benchmark_table(load_points(point_files()))


# ------------------------------------------------------------------------------------------------ paired jobs' events
# io_events rows of jobs with a paired replay, by hand: test_benchtables (efficiency and io_gap rows against the
# replay) and test_aggregate (a job's wall time without its replay).

PAIRED_T0 = 1_800_000_000.0


def run_event(step: str, op: str, cycle: str, t: float, mib: float, seconds: float, **extra) -> dict:
    """An io_events row of a job's run phase on tier disk, t seconds after PAIRED_T0."""
    return {"study": "s", "arm": "a", "tier": "disk", "step": step, "phase": "run", "op": op, "cycle": cycle,
            "t_start": PAIRED_T0 + t, "seconds": seconds, "bytes": int(mib * MiB), "n_files": 1, "nranks": 1,
            "cached_fraction": 1.0 if op == "read" else None, "repetition": 0, **extra}


def replay_event(step: str, op: str, cycle: str, t: float, mib: float, seconds: float, rep: int,
                 files: str | None = None) -> dict:
    """An io_events row of the job's paired replay (benchmarks.paired), repetition rep."""
    return {**run_event(step, op, cycle, t, mib, seconds), "phase": "replay", "repetition": rep,
            "n_files": 4, "cached_fraction": 1.0 if op == "read" else None, "file": files}


# ------------------------------------------------------------------------------------------------ benchmark outputs
# Unmodified copies of real IOR 4.0.0, mdtest and fio 3.33 outputs: test_benchparse parses each, test_rows all.

IOR_OUTPUTS = REPO / "tests" / "data" / "ior"
FIO_OUTPUTS = REPO / "tests" / "data" / "fio"
IOR_JSON = sorted(p for p in IOR_OUTPUTS.glob("*.json") if not p.name.startswith("error-")) + [
    FIO_OUTPUTS / "limit-ior-posix-fpp-1g-odirect-1rank-disk.json"
]
IOR_TEXT = sorted(IOR_OUTPUTS.glob("*-text.stdout.txt"))
MDTEST = sorted(IOR_OUTPUTS.glob("mdtest-*.stdout.txt"))
FIO_JSON = sorted(FIO_OUTPUTS.glob("fio-*.json"))


# ------------------------------------------------------------------------------------------------ docs/outputs.md
# The tables and columns docs/outputs.md lists, and how a study's tables differ from them: test_outputs_doc checks
# the page, test_workflow the smoke study's tables against it.

OUTPUTS_PAGE = REPO / "docs" / "outputs.md"
TABLE_SUFFIXES = (".csv", ".parquet")
SECTION = re.compile(r"^## (.+)$", re.M)
CODE = re.compile(r"`([^`]+)`")

# Tables the page documents that the smoke study does not write, and why.
NOT_IN_SMOKE = {
    "tables/replay_jobs.csv": "needs replay jobs (config darshan.jobs): test_darshan_workflow's study writes it",
    "tables/surrogate_vs_log.csv": "needs instruments.darshan (a darshan-runtime library) and a replay job with "
                                   "stands_for",
}
# Columns the page documents that a table of the smoke study does not have, and why.
COLUMNS_NOT_IN_SMOKE = {
    ("tables/tiers.csv", "lfs_getstripe"): "only a tier on Lustre with lfs on PATH has it",
    ("tables/tiers.csv", "remote"): "only an archive tier reached through htar has it (archive.remote)",
}
# Files the smoke study writes with a table's suffix that have no column list on the page, and why.
INTERNAL = {
    "bench/": "each benchmark point as cycleio bench wrote it; the page names them, and tables/benchmarks.csv holds "
              "every row of them (test_benchtables)",
}


def documented_tables(text: str | None = None) -> dict[str, list[str]]:
    """Per table the page documents (a `## ` section named by code spans of table files), the columns its column
    list names: the code spans of each row's first cell (a header row `| column | unit | what |` first)."""
    text = OUTPUTS_PAGE.read_text() if text is None else text
    tables: dict[str, list[str]] = {}
    parts = SECTION.split(text)
    for heading, body in zip(parts[1::2], parts[2::2]):
        files = [name for name in CODE.findall(heading) if name.endswith(TABLE_SUFFIXES)]
        if not files:
            continue
        rows = [line for line in body.splitlines() if line.startswith("|")]
        assert rows and rows[0].replace(" ", "") == "|column|unit|what|", f"{heading}: no column list"
        columns = [name for row in rows[2:] for name in CODE.findall(row.split("|")[1])]
        for name in files:
            assert name not in tables, f"docs/outputs.md documents {name} twice"
            tables[name] = columns
    return tables


def study_tables(results: Path) -> set[str]:
    """The tables a study wrote: every CSV and Parquet file under results/<study>, relative to it (a job's own
    files under arms/ are records, manifests and logs, not tables)."""
    return {str(path.relative_to(results)) for path in results.rglob("*")
            if path.suffix in TABLE_SUFFIXES and path.is_file() and path.relative_to(results).parts[0] != "arms"}


def columns_of(path: Path) -> list[str]:
    import pandas as pd

    if path.suffix == ".parquet":
        return list(pd.read_parquet(path).columns)
    return list(pd.read_csv(path, nrows=0).columns)


def written_columns(results: Path) -> dict[str, list[str]]:
    """Per table the study in results wrote (but the INTERNAL ones), its columns in the file's order."""
    return {name: columns_of(results / name) for name in sorted(study_tables(results))
            if not name.startswith(tuple(INTERNAL))}


def mismatches(results: Path, not_written: dict[str, str], columns_absent: dict[tuple[str, str], str]) -> list[str]:
    """What differs between the page and the study in results: tables and columns, by name."""
    return column_mismatches(written_columns(results), not_written, columns_absent)


def column_mismatches(written: dict[str, list[str]], not_written: dict[str, str],
                      columns_absent: dict[tuple[str, str], str]) -> list[str]:
    """What differs between the page and a study's tables given as {table: its columns}: tables and columns, by
    name. not_written: documented tables the study does not write; columns_absent: documented columns it lacks."""
    documented = documented_tables()
    problems = []
    internal = {name for name in written if name.startswith(tuple(INTERNAL))}
    for name in sorted(set(written) - set(documented) - internal):
        problems.append(f"{name}: written by the study, not documented on docs/outputs.md")
    for name, listed in documented.items():
        if name not in written:
            if name not in not_written:
                problems.append(f"{name}: documented, not written by the study (and not in the test's list of "
                                "tables it does not write)")
            continue
        if name in not_written:
            problems.append(f"{name}: written by the study, but listed as not written ({not_written[name]})")
        has = written[name]
        for column in listed:
            if column not in has and (name, column) not in columns_absent:
                problems.append(f"{name}: documents `{column}`, which the file does not have")
            if column in has and (name, column) in columns_absent:
                problems.append(f"{name}: has `{column}`, listed as absent ({columns_absent[name, column]})")
        for column in has:
            if column not in listed:
                problems.append(f"{name}: has `{column}`, which docs/outputs.md does not list")
    return problems


def assert_study_matches_page(results: Path) -> None:
    """The smoke study's tables, in results (results/<study>), against docs/outputs.md (called by test_workflow,
    which keeps the study's results)."""
    problems = mismatches(results, NOT_IN_SMOKE, COLUMNS_NOT_IN_SMOKE)
    assert not problems, "docs/outputs.md and the smoke study's tables differ:\n" + "\n".join(problems)


# The columns of the smoke study's tables, committed so that test_outputs_doc compares the page with them in seconds;
# test_workflow checks that the real tables still have exactly these. Written from a smoke study's results by
# tests/data/outputs_columns.py.
OUTPUTS_COLUMNS = REPO / "tests" / "data" / "outputs-columns.json"
OUTPUTS_COLUMNS_COMMAND = "PYTHONPATH=scripts .venv/bin/python tests/data/outputs_columns.py"


def snapshot_columns() -> dict[str, list[str]]:
    """The committed columns of the smoke study's tables: {table: its columns}."""
    import json

    return json.loads(OUTPUTS_COLUMNS.read_text())["tables"]


def assert_study_matches_snapshot(results: Path) -> None:
    """The smoke study's tables, in results, have the tables and columns of the committed snapshot."""
    real, snapshot = written_columns(results), snapshot_columns()
    problems = [f"{name}: in the snapshot, not written" for name in sorted(set(snapshot) - set(real))]
    problems += [f"{name}: written, not in the snapshot" for name in sorted(set(real) - set(snapshot))]
    for name in sorted(set(real) & set(snapshot)):
        if sorted(real[name]) != sorted(snapshot[name]):
            problems.append(f"{name}: has {sorted(set(real[name]) - set(snapshot[name]))} beyond the snapshot, "
                            f"lacks {sorted(set(snapshot[name]) - set(real[name]))}")
    assert not problems, (f"{OUTPUTS_COLUMNS.relative_to(REPO)} and the smoke study's tables differ (write it "
                          f"again: {OUTPUTS_COLUMNS_COMMAND} {results}):\n" + "\n".join(problems))


def hanging_launchers(folder: Path, mpiexec: str) -> tuple[str, str]:
    """A stand-in for a fault that cannot be caused at will (ranks waiting for ever in PMI, seen on several Slurm
    nodes of one machine): a launcher that hangs at its first launch and starts the ranks at the next, and one that
    always hangs."""
    once, always = folder / "hang-once", folder / "hang-always"
    once.write_text(f'#!/bin/sh\n[ -e {folder}/hung ] || {{ touch {folder}/hung; exec sleep 300; }}\nexec "$@"\n')
    always.write_text("#!/bin/sh\nexec sleep 300\n")
    for script in (once, always):
        script.chmod(0o755)
    return f"{once} {mpiexec} -n {{ntasks}}", f"{always} {mpiexec} -n {{ntasks}}"
