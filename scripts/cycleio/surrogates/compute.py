"""The compute stand-in of the surrogate steps and the forecast's compute ranks."""

from __future__ import annotations

import time


def burn_cpu(seconds: float) -> None:
    """A CPU-bound stand-in for model compute: small matrix products until the time is up."""
    import numpy

    matrix = numpy.random.default_rng(0).standard_normal((128, 128))
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        matrix = numpy.tanh(matrix @ matrix)
