"""``cycleio darshan inspect|replay``: a real job's I/O from its Darshan log (issue 25, docs/darshan.md)."""

from __future__ import annotations

import logging

log = logging.getLogger("cycleio")


def cmd_inspect(args) -> None:
    from ..darshan.logs import file_table, read_log
    from ..darshan.report import inspect_text, sidecar, write_inspect

    job = read_log(args.darshan_log)
    table = file_table(job)
    print(inspect_text(job, table))
    if args.out:
        write_inspect(args.out, job, table)
        log.info("wrote %s (%d rows: one per file and direction) and %s", args.out, len(table), sidecar(args.out))


def cmd_replay(args) -> None:
    from ..darshan.replay import Target, replay
    from ..darshan.report import sidecar, write_replay

    targets = [Target.parse(text) for text in args.dir]
    job, plan, runs = replay(args.darshan_log, targets, nranks=args.ranks, scale=args.scale, timing=args.timing,
                             launcher=args.launcher, oversubscribe=args.oversubscribe, keep=args.keep,
                             layer=args.layer)
    table, meta = write_replay(args.out, job, plan, runs)
    totals = table[table["file"] == "TOTAL"]
    print(totals[["tier", "direction", "logged_bytes", "replayed_bytes", "kernel_bytes", "logged_ops", "replayed_ops",
                  "kernel_ops", "replayed_s"]].to_string(index=False))
    print(meta["answer"])
    log.info("wrote %s and %s", args.out, sidecar(args.out))


def register(sub) -> None:
    """Add ``darshan`` (with ``inspect`` and ``replay``) to the ``cycleio`` parser's subparsers."""
    darshan = sub.add_parser("darshan", help="a real job's I/O from its Darshan log: inspect it, replay it on a tier")
    verbs = darshan.add_subparsers(dest="darshan_command", required=True, metavar="{inspect,replay}")
    inspect = verbs.add_parser("inspect", help="print what the job did (files, bytes, calls, sizes, times per rank)")
    inspect.add_argument("darshan_log", metavar="LOG", help="the job's Darshan log (*.darshan)")
    inspect.add_argument("--out", help="also write a CSV: one row per module, file and direction "
                                       "(sidecar OUT.meta.json)")
    inspect.set_defaults(func=cmd_inspect)

    rep = verbs.add_parser("replay", help="replay the job's file I/O under MPI on a folder; CSV of logged vs replayed "
                                          "vs the kernel")
    rep.add_argument("darshan_log", metavar="LOG", help="the job's Darshan log (*.darshan)")
    rep.add_argument("--dir", required=True, action="append",
                     help="folder to replay in, or NAME=FOLDER to name its tier; give it again to replay on each "
                          "in turn")
    rep.add_argument("--ranks", type=int, default=1,
                     help="MPI ranks of the replay; the log's ranks are dealt over them (default 1)")
    rep.add_argument("--scale", type=float, default=1.0,
                     help="every file, offset and operation times this, above 0 (default 1: the job's own sizes; "
                          "above 1 to time a small job)")
    rep.add_argument("--timing", choices=("io", "logged"), default="io",
                     help="io: operations back to back (default); logged: each rank's logged gaps, times the scale, "
                          "kept as compute")
    rep.add_argument("--out", required=True,
                     help="CSV to write (sidecar OUT.meta.json: the log, checksum, scale, ranks, timing, tiers, "
                          "the answer)")
    rep.add_argument("--layer", choices=("posix", "mpiio"), default="posix",
                     help="posix: every file's POSIX calls, what reached the file system (default); mpiio: files with "
                          "MPI-IO records through MPI-IO, collective where the log counted collective calls")
    rep.add_argument("--launcher", default="mpiexec -n {ntasks}", help="MPI launcher template (default: %(default)s)")
    rep.add_argument("--oversubscribe", action="store_true",
                     help="allow more ranks than CPUs (or Slurm tasks) here")
    rep.add_argument("--keep", action="store_true", help="leave the replay's files in the folder (default: removed)")
    rep.set_defaults(func=cmd_replay)
