"""The forecast's output as an MPI program: history and restart writes under the study's write strategies.

The fcst job (surrogates/steps.py, run by runner/job.py) calls :func:`launcher.run_forecast_mpi`, which starts the rank
program under the study's launcher (``mpiexec -n {ntasks}``, ``srun -n {ntasks}``) as
``python -m cycleio.surrogates.forecast.rank --spec JOB.json``, waits for it with a timeout, and
returns the records the ranks measured. Rank 0 writes them as JSON lines; the parent adds them to
the job's records.

Modules: layout.py (ranks and decomposition, plain arithmetic), plan.py (each file's pieces, the
hours), rank.py (the MPI program run on each rank: compute loop, records, and the services the
strategies work through), strategies/ (one module per write strategy, and their registry),
launcher.py (the parent side: the launcher, its timeout, the failing rank's error), errors.py.

Decomposition (what each compute rank holds, as the model's domain decomposition):
- the 4N x 2N Gaussian history grid is split by rows into one band per compute rank;
- each of the six N x N tiles is split by rows into k bands (FMS layout 1 x k): with a multiple of
  six compute ranks each tile gets its own k = ranks/6 ranks, as in the model; with fewer (the model
  needs at least six) every tile is split over all compute ranks (k = ranks).
What a file holds is its netCDF layout (nclayout.py) (dimensions, coordinates, attributes, fields with their
seeds), so every strategy writes the same data as the in-process writer. Data move in blocks of
many levels bounded by the buffer (``buffer_bytes``, 64 MiB), never plane by plane: each compute
rank makes its band of a block (timed apart, op ``generate``), and gathers and hand-offs place the
bands straight into the writer's block with MPI derived datatypes. Files without synthetic fields
(logs, coupler.res, fv_core.res.nc) are written whole by one rank with their writer (writers.py).

Write strategies (``ArmSettings.strategy``), for every output file of the hour (history and
restart): ``serial`` (gather to rank 0, which writes; all wait), ``diskless`` (as serial, the file
built in memory), ``per_rank`` (each rank writes its piece; pieces combined), ``parallel`` (every
compute rank writes its rows into the one shared file through MPI-IO), ``quilt`` (write-group ranks
take the blocks and write while compute ranks go on), ``quilt_parallel`` (as quilt, a group's ranks
writing each file together through MPI-IO). strategies/<name>.py tells how; mpiio.py writes the
shared files. The shared-file strategies run on the parallel-netCDF stack (config
``parallel_stack``: its launcher and Python, launcher.program_stack), the others under ``launcher``
with the project's Python.

Records (one per event, ``rank`` = MPI rank, ``nranks`` = ranks of the program):
- ``write``: a writer's time in storage I/O for one file or piece (bytes = its size on storage; for a
  shared file each rank's share of it, the shares adding up to its size, and ``mpiio`` its MPI-IO mode);
  building the file's structure (``define``) and codec work (``encode``) are records of their own;
- ``combine``: making an inventory file from its pieces (reads the pieces, writes the file);
- ``write_effective``: per compute rank and output hour, the time the rank was kept from computing by
  the hour's output (gathers, writes, hand-off and waits, not the data generation); ``file`` is the
  hour (``f003``), ``bytes`` the data the rank handed over or wrote;
- ``write_final``: the un-overlapped end: from the start of the last hour's output until every file
  of the forecast is on storage (the last hand-off plus the writers' drain, deferred combines);
- ``compute`` (the stand-in, per compute rank) and ``generate``.

A rank that fails writes its traceback beside the spec and calls MPI_Abort, so the job fails with
that rank's error, never hangs; the parent also bounds the run with a timeout. Long waits poll
nonblocking requests with short sleeps, so oversubscribed runs (4 ranks on 2 cores) do not burn the
cores that the writing ranks need (MPICH's blocking calls busy-poll).

Fault injection (config ``faults.fail_rank``) makes one rank raise at its first output hour, under
every strategy (rank.py).
"""
