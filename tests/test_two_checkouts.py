"""Two checkouts run a study of the same name on one node at the same time.

Each is a copy of the workflow (Snakefile, rules, config, the package) in a folder of its own, as
two clones would be; both runs start together with different seeds. With the default scratch paths
(``{workdir}``) both end correct; with a user's path without it, one is refused before any job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cycleio.storage.checksums import verify_manifest
from cycleio.config.tierspec import current_user, workdir_tag

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent
CHECKOUT_PARTS = ("Snakefile", "rules", "config", "scripts", "report", "envs", "profiles")
# The smallest study that still stages: the half cycle (fcst, post on scratch) of one staged arm.
LAST_MANIFEST = "results/smoke/arms/node_local/2026123112/post.manifest.json"


def checkout(repo: Path, folder: Path) -> Path:
    folder.mkdir(parents=True)
    for part in CHECKOUT_PARTS:
        source = repo / part
        if source.is_dir():
            shutil.copytree(source, folder / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, folder / part)
    return folder


def node_tmpdir(tmp_path: Path) -> Path:
    """The node's TMPDIR, made before either run starts as a node's is: Snakemake passes its jobs
    ``tempfile.gettempdir()`` as TMPDIR, which is /tmp when the folder does not exist yet."""
    node_tmp = tmp_path / "node-tmp"
    node_tmp.mkdir()
    return node_tmp


def start(folder: Path, layer: dict, node_tmp: Path, *args: str) -> subprocess.Popen:
    """Snakemake in ``folder`` on the smoke study with ``layer`` over it; TMPDIR is the node's, shared."""
    (folder / "layer.yaml").write_text(yaml.safe_dump(layer))
    cmd = [str(BIN / "snakemake"), *args, "--cores", "2", "--configfile", "config/studies/smoke.yaml", "layer.yaml"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}  # one node, outside a batch job
    env.update(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", TMPDIR=str(node_tmp))
    return subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(run: subprocess.Popen) -> tuple[int, str]:
    output, _ = run.communicate(timeout=600)
    return run.returncode, output


def layer(seed: int, **more) -> dict:
    return {"seed": seed, "cycles": {"end": "2026123112"}, "scratch_tiers": ["node_local"],
            "benchmarks": {"enabled": False}, **more}


def verified(folder: Path) -> int:
    """How many files the checkout's manifests list; fails on any that is missing or differs."""
    manifests = sorted((folder / "results/smoke/arms").rglob("*.manifest.json"))
    assert manifests, f"no manifests in {folder}"
    total = 0
    for manifest in manifests:
        matched, problems = verify_manifest(manifest)
        assert not problems, problems
        total += matched
    return total


@pytest.fixture
def two_checkouts(repo, tmp_path):
    a, b = checkout(repo, tmp_path / "a"), checkout(repo, tmp_path / "b")
    yield a, b
    for folder in (a, b):  # the default shm tier is outside tmp_path
        shutil.rmtree(Path("/dev/shm") / f"cycleio-{current_user()}" / f"local-{workdir_tag(folder)}",
                      ignore_errors=True)


def test_same_study_in_two_checkouts_at_once_ends_correct_in_both(two_checkouts, tmp_path):
    a, b = two_checkouts
    node_tmp = node_tmpdir(tmp_path)
    runs = [start(a, layer(1), node_tmp, LAST_MANIFEST), start(b, layer(2), node_tmp, LAST_MANIFEST)]
    for code, output in map(finish, runs):
        assert code == 0, output[-4000:]
    fcst = [json.loads((f / "results/smoke/arms/node_local/2026123112/fcst.manifest.json").read_text())
            for f in (a, b)]
    scratch = [Path(m["provenance"]["tiers"]["scratch"]["path"]) for m in fcst]
    # one node-local folder, a subfolder of its own for each checkout
    assert scratch[0] != scratch[1] and scratch[0].parent == scratch[1].parent
    assert [p.name for p in scratch] == [f"local-{workdir_tag(a)}", f"local-{workdir_tag(b)}"]
    assert verified(a) == verified(b) > 0  # every file matches its own checkout's manifest
    # the seeds differ, so most files of the other run under this run's manifest would not match
    checksums = [{o["path"]: o["xxh3_64"] for o in m["outputs"]} for m in fcst]
    assert checksums[0].keys() == checksums[1].keys()
    assert sum(checksums[0][name] != checksums[1][name] for name in checksums[0]) > len(checksums[0]) / 2
    assert not list(node_tmp.rglob(".job.*"))


def test_a_tier_path_shared_by_two_checkouts_refuses_the_second_before_any_job(two_checkouts, tmp_path):
    a, b = two_checkouts
    node_tmp = node_tmpdir(tmp_path)
    shared = {"tiers": {"node_local": {"kind": "node_local", "path": str(tmp_path / "scratch")}}}
    runs = [start(a, layer(1, **shared), node_tmp, LAST_MANIFEST), start(b, layer(2, **shared), node_tmp, LAST_MANIFEST)]
    results = dict(zip((a, b), map(finish, runs)))
    winners = [f for f, (code, _) in results.items() if code == 0]
    assert len(winners) == 1, {str(f): (code, out[-2000:]) for f, (code, out) in results.items()}
    (winner,) = winners
    (loser,) = {a, b} - {winner}
    refusal = results[loser][1]
    assert (f"cycleio: cannot start the study: tier 'node_local': {tmp_path / 'scratch' / 'smoke'} holds study "
            f"'smoke' of another checkout, {os.path.realpath(winner)}") in refusal, refusal[-3000:]
    assert "Put {workdir} in the tier's path" in refusal
    assert not (loser / "results/smoke/arms").exists()  # no job of the loser ran
    assert verified(winner) > 0
    # later, and in a dry run too, the loser is still refused: the winner's files stay its own
    code, again = finish(start(loser, layer(2, **shared), node_tmp, "-n"))
    assert code != 0 and f"of another checkout, {os.path.realpath(winner)}" in again
