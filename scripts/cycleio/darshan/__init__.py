"""A real job's I/O from its Darshan log: inspect it, and replay it under MPI on any folder (issue 25).

- logs.py: read a log with pydarshan, refuse what cannot be replayed (a log cut short), set apart what is not
  storage (streams, pipes, devices, /proc), and describe the job (``cycleio darshan inspect``): one row per file
  and direction, the job's own I/O times (the union of its calls' intervals per rank).
- reader.py: pydarshan's report read as darshan-parser reads a log: what it cannot decode (a mount table entry that
  is not text, a module) a warning, not the log.
- plan.py: the log as per-rank operation lists: DXT's own operations where the log traced them, operations
  synthesised from the counters otherwise (the rule is in docs/darshan.md), the log's ranks dealt over the
  replay's, sizes and offsets scaled.
- rank.py: the MPI program every replay rank runs (mpi4py), counting its own I/O and the kernel's.
- replay.py: the parent: checks before anything starts (room, ranks), the input files laid out untimed, the
  launch, and the answer (report.py: the fidelity CSV, its provenance sidecar, the timing sentence).
"""
