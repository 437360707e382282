"""The C library, opened once: the system calls Python's os module lacks (syncfs, sync_file_range, mincore)."""

from __future__ import annotations

import ctypes


libc = ctypes.CDLL(None, use_errno=True)
