"""Snakemake's working-directory lock after a killed run.

Snakemake locks its working directory (``.snakemake/locks``) while it runs and removes the lock
when it stops; a run killed hard (``kill -9``, a lost node, a power cut) leaves the lock behind and
every later run stops with "Directory cannot be locked" until someone runs ``snakemake --unlock``.
The lock holds no process id, so whether its owner is gone is told from the processes themselves:
while a Snakemake process, or any job it started, works in this directory, the lock is live.

fio's job processes make themselves session leaders, so a kill of the run's process group misses
them: their main process gone, they wait forever on the tiers (holding files, memory on /dev/shm).
Before a rerun, such orphans of a killed run are stopped too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
from pathlib import Path

import psutil

from ..process import run_command

log = logging.getLogger(__name__)


def lock_files(workdir: Path) -> list[Path]:
    folder = workdir / ".snakemake" / "locks"
    return sorted(folder.glob("*.lock")) if folder.is_dir() else []


def _is_workflow_process(cmdline: list[str]) -> bool:
    """Snakemake itself, or one of the jobs it runs (`python -m cycleio ...`, the MPI forecast ranks)."""
    programs = {os.path.basename(word) for word in cmdline[:2]}
    modules = {cmdline[i + 1].split(".")[0] for i, word in enumerate(cmdline[:-1]) if word == "-m"}
    return bool({"snakemake", "cycleio"} & (programs | modules))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + os.sep)


def live_processes(workdir: Path) -> list[tuple[int, str]]:
    """(pid, command line) of the workflow processes working in ``workdir``, this process and its
    ancestors (make, the shell) excepted."""
    target = os.path.realpath(workdir)
    own = _ancestors(os.getpid())
    found = []
    for proc in psutil.process_iter(["cwd", "cmdline"]):  # gone meanwhile: left out; another user's: None
        if proc.pid in own:
            continue
        words, cwd = [w for w in proc.info["cmdline"] or [] if w], proc.info["cwd"]
        if words and cwd and _inside(cwd, target) and _is_workflow_process(words):
            found.append((proc.pid, " ".join(words)))
    return found


BENCHMARK_TOOLS = ("fio", "ior", "mdtest")


def _raw_output_inside(words: list[str], cwd: str, target: str) -> bool:
    """Whether a tool's command line names a benchmark's ``.raw`` folder inside ``target`` (a word such as
    ``--output=results/s/bench/disk/easy.raw/x.json``, relative to the tool's ``cwd``)."""
    for word in words:
        if ".raw/" in word:
            path = word.split("=", 1)[-1]
            if _inside(os.path.realpath(os.path.join(cwd, path)), target):
                return True
    return False


def orphaned_tools(workdir: Path) -> list[psutil.Process]:
    """Benchmark tools a study started in ``workdir`` (their output goes to a benchmark's ``.raw``
    folder inside it) whose parent is no longer a tool or workflow process: a fio a user runs by hand
    is not one, nor one that only works there and writes its output elsewhere (a test's, a bench's)."""
    target = os.path.realpath(workdir)
    found = []
    for proc in psutil.process_iter(["name", "cmdline", "cwd", "ppid"]):
        words, cwd = proc.info["cmdline"] or [], proc.info["cwd"] or ""
        if not words or os.path.basename(words[0]) not in BENCHMARK_TOOLS:
            continue
        if not _inside(cwd, target) or not _raw_output_inside(words, cwd, target):
            continue
        try:
            parent = psutil.Process(proc.info["ppid"]).cmdline() if proc.info["ppid"] > 1 else []
        except psutil.Error:
            parent = []
        if not parent or not (os.path.basename(parent[0]) in BENCHMARK_TOOLS or _is_workflow_process(parent)):
            found.append(proc)
    return found


def _ancestors(pid: int) -> set[int]:
    """``pid`` and its parents up to init (a parent gone meanwhile ends the chain there)."""
    chain = {pid}
    with contextlib.suppress(psutil.Error):
        chain.update(parent.pid for parent in psutil.Process(pid).parents())
    return chain


def remove_stale_lock(workdir: Path, snakemake_args: list[str]) -> str:
    """Unlock ``workdir`` if a lock is there and no workflow process works in it; say what was done.

    Raises RuntimeError while another run is live (it names the processes), so a second run never
    starts under the first.
    """
    locks = lock_files(workdir)
    live = live_processes(workdir)
    if live and locks:
        listed = "; ".join(f"pid {pid}: {cmd[:120]}" for pid, cmd in live[:5])
        raise RuntimeError(f"{workdir} is locked by a run that is still going ({listed}); wait for it or stop it")
    if not live:
        for proc in orphaned_tools(workdir):
            with contextlib.suppress(psutil.Error):
                log.warning("stopping %s (pid %d), left running by a killed run", " ".join(proc.cmdline())[:160], proc.pid)
                proc.kill()
    if not locks:
        return "no lock"
    result = run_command([sys.executable, "-m", "snakemake", "--unlock", *snakemake_args], cwd=workdir,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"snakemake --unlock failed (exit code {result.returncode}): "
                           f"{(result.stderr or result.stdout).strip()[-2000:]}")
    message = (f"removed the lock a killed run left in {workdir / '.snakemake' / 'locks'} "
               f"({len(locks)} lock files; no Snakemake process or job works there any more)")
    log.warning(message)
    return message
