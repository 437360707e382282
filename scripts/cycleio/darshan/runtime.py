"""darshan-runtime on a job's own processes (config ``instruments.darshan``): each job keeps its Darshan log beside
its records, so a site can open the surrogate's log with the tools it uses for its model's logs.

Darshan is preloaded (``LD_PRELOAD``), so it must be in place when a process starts: a job's command re-executes
itself once with it (:func:`preload_job`), and each rank of an MPI program the job starts does the same
(:func:`preload_rank`). Darshan reads ``DARSHAN_LOGFILE`` when it writes the log, at the process's exit (or
``MPI_Finalize``), so every process names its own log and none overwrites another's:

- the job's process: ``<step>.darshan`` beside ``<step>.records.jsonl``;
- each rank: ``<step>.<program>.rank<N>.darshan`` (``DARSHAN_ENABLE_NONMPI`` is set, so even a library built with
  MPI logs each process, and logs the job's own process, which never calls ``MPI_Init``).

Once a process runs under Darshan, ``LD_PRELOAD`` leaves its environment: what it starts (fio's paired replay, the
MPI launcher, ``uname``) runs without it, as instruments or plumbing, not the job's I/O, and would otherwise claim
the process's log name first (darshan-runtime creates a log with ``O_EXCL``: an earlier attempt's logs are removed
before the job starts again); the rank programs put it back for themselves.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
from pathlib import Path

LIBRARY_ENV = "CYCLEIO_DARSHAN_LIBRARY"  # the library the job preloads, for its rank programs to preload too
LOG_ENV = "CYCLEIO_DARSHAN_LOG"  # the job's log: the ranks' logs are named after it
CONFIG_ENV = "DARSHAN_CONFIG_PATH"
RECORDS_SUFFIX = ".records.jsonl"
LOG_SUFFIX = ".darshan"
CONFIG_SUFFIX = ".darshan-config"

RANK_ENVS = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")  # what launchers tell each rank


def log_beside(records: Path) -> Path:
    """The job's Darshan log, beside its records: ``<step>.records.jsonl`` -> ``<step>.darshan``."""
    name = records.name
    stem = name[: -len(RECORDS_SUFFIX)] if name.endswith(RECORDS_SUFFIX) else records.stem
    return records.with_name(stem + LOG_SUFFIX)


def job_logs(records: Path) -> list[Path]:
    """Every Darshan log a job left beside ``records``: its own process's and its ranks' (sorted)."""
    own = log_beside(records)
    ranks = sorted(own.parent.glob(f"{own.name[: -len(LOG_SUFFIX)]}.*.rank*{LOG_SUFFIX}"))
    return [path for path in [own, *ranks] if path.is_file()]


def check_library(library: str, key: str = "instruments.darshan") -> None:
    """ValueError naming ``key`` unless ``library`` loads here (a missing file, or a library it needs, such as the
    libmpi of an MPI build, that the loader cannot find: what a preloaded process would die of at its start)."""
    try:
        ctypes.CDLL(library)
    except OSError as err:
        raise ValueError(f"{key}: {library!r} cannot be loaded on {socket.gethostname()} ({err}); expected "
                         "darshan-runtime's libdarshan.so, with what it links (an MPI build's libmpi) on the loader's "
                         "path (LD_LIBRARY_PATH), or \"\" to run without it") from None


def _preloaded(library: str) -> bool:
    return library in os.environ.get("LD_PRELOAD", "").split()


def _exec_with(library: str, log: Path, extra: dict[str, str]) -> None:
    env = dict(os.environ)
    env.update(extra)
    env["LD_PRELOAD"] = " ".join([library, *(p for p in env.get("LD_PRELOAD", "").split() if p != library)])
    env["DARSHAN_ENABLE_NONMPI"] = "1"
    env["DARSHAN_LOGFILE"] = str(log)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def _drop_preload(library: str) -> None:
    """LD_PRELOAD without ``library`` for what this process starts (it stays loaded here)."""
    rest = [p for p in os.environ.get("LD_PRELOAD", "").split() if p != library]
    if rest:
        os.environ["LD_PRELOAD"] = " ".join(rest)
    else:
        os.environ.pop("LD_PRELOAD", None)


def preload_job(library: str, records: Path, tier_roots: list[Path]) -> None:
    """Run this job's process under Darshan (re-executed once with the library preloaded), its log beside
    ``records``, every file below ``tier_roots`` recorded (:func:`write_config`); nothing when ``library`` is empty.
    A log left by an earlier attempt is replaced at the exit."""
    if not library:
        return
    log = str(log_beside(records).resolve())
    if os.environ.get(LOG_ENV) == log:  # the re-executed job: Darshan is loaded
        _drop_preload(library)
        return
    check_library(library)
    for stale in job_logs(records):  # an earlier attempt's: darshan-runtime does not overwrite a log
        stale.unlink()
    config = write_config(Path(log).with_suffix(CONFIG_SUFFIX), tier_roots, os.environ.get(CONFIG_ENV))
    _exec_with(library, Path(log), {LIBRARY_ENV: library, LOG_ENV: log, CONFIG_ENV: str(config)})


_ERE_SPECIAL = set(".[]()*+?{}|^$\\")


def _ere_literal(text: str) -> str:
    """``text`` as a POSIX extended regular expression matching it (darshan-runtime compiles ERE); a comma or blank,
    which the config file's syntax splits on, as any character."""
    return "".join("\\" + c if c in _ERE_SPECIAL else "." if c in ", \t" else c for c in text)


def write_config(path: Path, tier_roots: list[Path], site_config: str | None) -> Path:
    """darshan-runtime's configuration for a job (``DARSHAN_CONFIG_PATH``): the site's own (if it set one), then every
    file below the tiers recorded, even where darshan-runtime leaves a folder out by default (``/dev/``, which holds
    ``/dev/shm``; ``/var/``, ``/opt/``, ``/usr/``)."""
    site = Path(site_config).read_text() if site_config and Path(site_config).is_file() else ""
    patterns = ",".join(f"^{_ere_literal(str(root).rstrip('/'))}/" for root in tier_roots)
    text = (site.rstrip("\n") + "\n" if site else "") + f"NAME_INCLUDE\t{patterns}\t*\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def rank_number() -> int:
    for name in RANK_ENVS:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def preload_rank(program: str) -> None:
    """In a rank program a Darshan-logged job started: re-execute once under Darshan, the log named after the
    job's (``<step>.<program>.rank<N>.darshan``); nothing in a job without Darshan."""
    library, job_log = os.environ.get(LIBRARY_ENV, ""), os.environ.get(LOG_ENV, "")
    if not library or not job_log:
        return
    if _preloaded(library):  # the re-executed rank: what it starts (uname, a shell) runs without Darshan
        _drop_preload(library)
        return
    base = job_log[: -len(LOG_SUFFIX)] if job_log.endswith(LOG_SUFFIX) else job_log
    log = Path(f"{base}.{program}.rank{rank_number()}{LOG_SUFFIX}")
    log.unlink(missing_ok=True)
    _exec_with(library, log, {})
