"""Storage: tiers, the staging engine and its file system probes."""
