import json
import time

import pytest

from cycleio.records import RECORD_FIELDS, RecordLog, read_records

DESIGN_FIELDS = (
    "study arm cycle step phase op tier tier_kind fs_type strategy tool host rank nranks file n_files bytes "
    "t_start seconds attempt cache_risk"
).split() + ["transfers"]  # the design's fields, and the storage calls the replay matches (transfer size)


def test_record_fields_are_the_designs():
    assert list(RECORD_FIELDS) == DESIGN_FIELDS


def test_record_log_writes_json_lines_atomically(tmp_path):
    log = RecordLog(study="s", arm="shm", cycle="2026010100", step="fcst", strategy="serial")
    with log.timed(phase="run", op="write", tier="shm", tier_kind="memory", fs_type="tmpfs") as event:
        time.sleep(0.01)
        event["bytes"] = 1234
    log.add(phase="cleanup", op="remove", tier="shm", tier_kind="memory", fs_type="tmpfs", n_files=3)
    out = tmp_path / "sub" / "x.records.jsonl"
    log.write(out)
    rows = read_records(out)
    assert [r["op"] for r in rows] == ["write", "remove"]
    assert rows[0]["bytes"] == 1234 and rows[0]["seconds"] >= 0.01 and rows[0]["t_start"] > 0
    assert set(rows[0]) == set(DESIGN_FIELDS)
    assert all(json.loads(line) for line in out.read_text().splitlines())
    assert [p.name for p in out.parent.iterdir()] == ["x.records.jsonl"]  # no temporary left behind


def test_unknown_context_field_is_refused():
    with pytest.raises(TypeError, match="unknown record fields"):
        RecordLog(study="s", colour="red")


def test_failed_write_leaves_no_final_file(tmp_path, monkeypatch):
    log = RecordLog(study="s")
    log.add(phase="run", op="write", tier="t", tier_kind="posix", fs_type="ext4", arm="a", cycle="c", step="p")
    out = tmp_path / "r.jsonl"

    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("cycleio.records.json.dumps", boom)
    with pytest.raises(OSError):
        log.write(out)
    assert list(tmp_path.iterdir()) == []
