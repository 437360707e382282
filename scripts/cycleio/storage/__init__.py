"""Storage: tiers, the staging engine, safe landing of files, and the preflight check of a study's tiers."""
