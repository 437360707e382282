"""Workflow glue: what the Snakefile and rules need at DAG time (the study's jobs and what each
waits for, each rule's threads and Slurm resources, the check that
the study's tiers are writable and hold it)."""
