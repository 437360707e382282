# Benchmarks on every tier (IOR, mdtest, fio, field I/O): filled in by the benchmarks capability.


def benchmark_outputs():
    return []
