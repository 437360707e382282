"""logs: progress goes to the rule's log file (else stderr), and an uncaught error's traceback goes there too."""

from __future__ import annotations

import logging
import sys

import pytest

from cycleio.logsetup import log, setup_logging


@pytest.fixture
def restore_logging():
    root, hook = logging.getLogger(), sys.excepthook
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers[:], sys.excepthook = handlers, hook
    root.setLevel(level)


def test_progress_and_an_uncaught_traceback_go_to_the_log_file(tmp_path, restore_logging):
    path = tmp_path / "logs" / "fcst.log"
    setup_logging(str(path))
    log.info("staging 3 files")
    try:
        raise RuntimeError("the step failed")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())
    text = path.read_text()
    assert " INFO staging 3 files\n" in text
    assert " ERROR Traceback (most recent call last):" in text and "RuntimeError: the step failed" in text


def test_without_a_log_file_progress_goes_to_stderr(restore_logging, capsys):
    setup_logging(None)
    log.info("no file")
    assert capsys.readouterr().err.endswith(" INFO no file\n")
