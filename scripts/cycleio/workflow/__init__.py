"""Workflow glue: what the Snakefile and rules need at DAG time (Slurm resources of each rule)."""
