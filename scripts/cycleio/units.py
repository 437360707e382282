"""Units the study reports in: MiB and MiB/s are 2**20 bytes (as IOR and fio report them)."""

MiB = 2**20
