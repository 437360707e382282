"""The job runner: a job as stage-in, run, stage-out, verify, cleanup, then its records and manifest, with the
instruments (kernel counts, page probe, paired replay, fault injection, input eviction) entered and left around
its phases. What a step reads and writes, and how, is the surrogates'."""
