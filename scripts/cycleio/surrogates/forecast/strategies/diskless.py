"""``diskless``: as serial, but rank 0 builds each netCDF file in memory (``diskless=True, persist=True``) and
writes it at close."""

from __future__ import annotations

from .serial import Serial


class Diskless(Serial):
    diskless = True
