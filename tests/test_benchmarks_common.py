"""benchmarks.common: the one tool runner (time limits, failures named with their command)."""

from __future__ import annotations

import shlex
import time

import psutil
import pytest

from cycleio.benchmarks.common import BenchmarkError, run_tool


def test_a_tool_past_its_time_limit_is_stopped_with_its_children(tmp_path):
    pid_file = tmp_path / "child.pid"
    argv = ["sh", "-c", f"echo started; sleep 60 & echo $! > {pid_file}; wait"]
    t0 = time.monotonic()
    with pytest.raises(BenchmarkError) as err:
        run_tool("mytool", argv, tmp_path, "slow", timeout=1)
    assert time.monotonic() - t0 < 30
    message = str(err.value)
    assert message.startswith("mytool did not finish within 1 s and was stopped with its child processes")
    assert "its last words: started" in message and "(command: sh -c 'echo started;" in message
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the tool's child is still running"
        time.sleep(0.05)
    assert '"timed_out": true' in (tmp_path / "slow.meta.json").read_text()


def test_a_failed_tool_names_itself_its_exit_code_and_command(tmp_path):
    from cycleio.benchmarks.common import tool_failure

    run = run_tool("mytool", ["sh", "-c", "echo one; echo two >&2; exit 3"], tmp_path, "fails", timeout=60)
    assert run.returncode == 3
    message = str(tool_failure("mytool", run))
    assert message == "mytool failed (exit code 3): two (command: sh -c 'echo one; echo two >&2; exit 3')"


def test_a_failed_rank_programs_exception_is_named_though_another_ranks_traceback_ends_its_output(tmp_path):
    """Two Python ranks failing at once interleave their tracebacks on one stderr, and the one killed mid-print
    leaves the last lines inside its traceback (seen in make test-fast: the reason was cut off)."""
    from cycleio.benchmarks.common import tool_failure

    said = ["Traceback (most recent call last):", '  File "fieldio.py", line 179, in make_store',
            "ValueError: unknown field layout 'bogus'", "Traceback (most recent call last):",
            '  File "fieldio.py", line 235, in run_ranks', "    store = make_store(layout, root, rank, fsync)"]
    script = tmp_path / "ranks.sh"
    script.write_text("".join(f"echo {shlex.quote(line)} >&2\n" for line in said) + "exit 1\n")
    run = run_tool("field I/O", ["sh", str(script)], tmp_path, "ranks", timeout=60)
    assert str(tool_failure("field I/O", run)).startswith(
        "field I/O failed (exit code 1): ValueError: unknown field layout 'bogus' (command: ")


def test_a_tool_that_cannot_start_is_named(tmp_path):
    with pytest.raises(BenchmarkError, match=r"mytool could not start: No such file or directory \(command: "
                                             r"/no/such/tool -x\)"):
        run_tool("mytool", ["/no/such/tool", "-x"], tmp_path, "missing", timeout=60)


def test_the_time_limit_grows_with_the_work_and_the_environment_sets_it(monkeypatch):
    from cycleio.benchmarks.common import TIMEOUT_VARIABLE, time_limit

    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    assert time_limit() == 600 and time_limit(nbytes=2**31, operations=500) == 600 + 1024 + 10
    monkeypatch.setenv(TIMEOUT_VARIABLE, "5")
    assert time_limit(nbytes=2**40) == 5
