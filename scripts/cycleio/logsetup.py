"""Logging of the ``cycleio`` command and of the forecast's MPI program: one setup for both."""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path

log = logging.getLogger("cycleio")


def setup_logging(log_file: str | None) -> None:
    """Progress goes to the log file when one is given (the rule's log), else to stderr."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        handlers = [logging.FileHandler(log_file, mode="w")]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", handlers=handlers, force=True)

    def excepthook(kind, value, tb):
        log.error("".join(traceback.format_exception(kind, value, tb)))

    sys.excepthook = excepthook
