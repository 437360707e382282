"""Benchmarks on the tiers: the plan, the tools (IOR, mdtest, fio) and their parsers, field I/O, replay."""
