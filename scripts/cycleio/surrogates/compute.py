"""The compute stand-ins of the surrogate steps and the forecast's compute ranks (config key
``compute_kind``): sleep, or burn the CPU as a model does."""

from __future__ import annotations

import time
from typing import Callable


def burn_cpu(seconds: float) -> None:
    """A CPU-bound stand-in for model compute: small matrix products until the time is up."""
    import numpy

    matrix = numpy.random.default_rng(0).standard_normal((128, 128))
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        matrix = numpy.tanh(matrix @ matrix)


COMPUTE_KINDS: dict[str, Callable[[float], None]] = {"sleep": time.sleep, "burn": burn_cpu}
