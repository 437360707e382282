import json
import re
import time

import pytest

from conftest import REPO
from cycleio.records import RECORD_FIELDS, RecordLog, read_record_table, read_records, record_schema

# The design's line naming a record's fields, in the README or a page of docs/:
# "Every timed event is a **record** (JSON lines): `study, arm, ...`".
DESIGN_LINE = re.compile(r"\*\*records?\*\* \(JSON lines\):\s*`([^`]+)`")


def design_fields() -> dict[str, list[str]]:
    """The record fields each design document lists (file name -> fields), read from the text, not the code."""
    found = {}
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for match in DESIGN_LINE.finditer(path.read_text()):
            found[str(path.relative_to(REPO))] = [name.strip() for name in match.group(1).split(",")]
    return found


DESIGN_FIELDS = next(iter(design_fields().values()), [])


def test_record_fields_are_the_designs():
    """A field added, renamed or reordered in the code (cycleio.records.Record) without the design's line (or the
    other way round) fails here."""
    documents = design_fields()
    assert documents, f"no design document names the record fields (a line matching {DESIGN_LINE.pattern})"
    for document, listed in documents.items():
        assert list(RECORD_FIELDS) == listed, f"{document} lists the record fields {listed}"
    # the documents' lines are read right: the fields every version of the design has had
    assert DESIGN_FIELDS[:3] == ["study", "arm", "cycle"] and {"bytes", "seconds", "cache_risk"} <= set(DESIGN_FIELDS)


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


def write_lines(path, lines: list[str]):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_record_table_has_a_typed_column_per_field(tmp_path):
    log = RecordLog(study="s", arm="shm", cycle="2026010100", step="fcst", host="n1")
    log.add(phase="run", op="write", tier="shm", tier_kind="memory", fs_type="tmpfs", bytes=7, seconds=0.5)
    log.write(tmp_path / "x.records.jsonl")
    lines = (tmp_path / "x.records.jsonl").read_text().splitlines()
    old_format = {key: value for key, value in json.loads(lines[0]).items() if key not in ("transfers", "cache_risk")}
    path = write_lines(tmp_path / "y.records.jsonl", [lines[0], "", json.dumps({**old_format, "colour": "red"})])

    table = read_record_table(path)
    assert table.schema == record_schema() and table.column_names == DESIGN_FIELDS
    assert table.to_pylist() == [read_records(path)[0], {**old_format, "transfers": None, "cache_risk": None}]
    assert str(table.schema.field("cycle").type) == "large_string" and str(table.schema.field("bytes").type) == "int64"


def test_empty_record_file_is_an_empty_table(tmp_path):
    path = write_lines(tmp_path / "empty.records.jsonl", [])
    assert read_records(path) == [] and read_record_table(path).num_rows == 0


@pytest.mark.parametrize("bad_line, message", [
    ('{"study": "s", "bytes": ', "line 3, column 26: not JSON"),
    ("[1, 2]", "line 3: not a JSON object"),
    ('{"study": "s", "bytes": "many"}', "line 3: a field's value does not fit its type"),
])
def test_malformed_record_names_file_and_line(tmp_path, bad_line, message):
    good = json.dumps({"study": "s", "arm": "a", "bytes": 1})
    path = write_lines(tmp_path / "bad.records.jsonl", [good, good, bad_line, good])
    with pytest.raises(ValueError, match=rf"bad\.records\.jsonl, {message}"):
        read_record_table(path)
    if "type" not in message:  # the dicts themselves are fine there: only their types do not fit a record
        with pytest.raises(ValueError, match=rf"bad\.records\.jsonl, {message}"):
            read_records(path)
