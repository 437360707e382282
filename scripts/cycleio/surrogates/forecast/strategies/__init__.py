"""The forecast's write strategies, one module each, registered by the name the config uses.

A strategy is a class (base.WriteStrategy): what a compute rank does per output hour, what it does
after the last hour, and whether the program has writer ranks and what they run. Adding one is a
module with its class and a line in ``STRATEGIES``; the schema's ``write_strategies`` enum names
the same strategies (tests/test_strategies.py holds them equal). Strategies with ``shared_file`` write
through MPI-IO and run on the parallel-netCDF stack (config ``parallel_stack``, launcher.py).

The layout reads the registry when Snakemake builds the DAG (a forecast job's tasks), so these
modules import no numpy, MPI or netCDF: a strategy works through its rank's services (rank.py)
and imports a writer's library inside the hook that uses it.
"""

from __future__ import annotations

from .base import WriteStrategy
from .diskless import Diskless
from .parallel import Parallel
from .per_rank import PerRank
from .quilt import Quilt
from .quilt_parallel import QuiltParallel
from .serial import Serial

# In the order reports show them: from waiting for every write to hiding the writes.
STRATEGIES: dict[str, type[WriteStrategy]] = {
    "serial": Serial,
    "diskless": Diskless,
    "per_rank": PerRank,
    "parallel": Parallel,
    "quilt": Quilt,
    "quilt_parallel": QuiltParallel,
}
