"""storage.checksums: the one block checksum, and a manifest's files verified against it."""

from __future__ import annotations

import os

from cycleio.storage import checksums
from cycleio.storage.checksums import checksum_file


def test_the_checksum_is_the_block_tree_whatever_the_streams(tmp_path, small_blocks):
    """The one block checksum: xxh3-64 of the blocks' xxh3-64 digests (an empty file: one empty block)."""
    import xxhash

    data = os.urandom(2 * 2**20 + 77)
    (tmp_path / "three").write_bytes(data)
    (tmp_path / "empty").write_bytes(b"")
    tree = xxhash.xxh3_64(b"".join(xxhash.xxh3_64(data[i:i + 2**20]).digest() for i in range(0, len(data), 2**20)))
    assert {checksum_file(tmp_path / "three", streams=n) for n in (1, 3)} == {tree.hexdigest()}
    assert checksum_file(tmp_path / "empty") == xxhash.xxh3_64(xxhash.xxh3_64(b"").digest()).hexdigest()


def test_verify_manifest_names_every_file_missing_or_changed_and_the_cli_fails_on_them(tmp_path, capsys):
    import json

    from cycleio.cli import main

    root = tmp_path / "tier"
    root.mkdir()
    outputs = []
    for name in ("kept", "changed", "gone", "shortened"):
        (root / name).write_bytes(name.encode() * 1000)
        outputs.append({"path": name, "bytes": (root / name).stat().st_size, "xxh3_64": checksum_file(root / name)})
    manifest = tmp_path / "arms" / "fcst.manifest.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({"root": str(root), "outputs": outputs}))
    assert checksums.verify_manifest(manifest) == (4, [])
    assert main(["verify", str(tmp_path / "arms")]) == 0
    assert capsys.readouterr().out == "1 manifests: 4 files match their checksums, 0 missing or differ\n"

    (root / "changed").write_bytes(b"x" * outputs[1]["bytes"])
    (root / "gone").unlink()
    (root / "shortened").write_bytes(b"short")
    matched, problems = checksums.verify_manifest(manifest)
    assert matched == 1 and problems == [
        f"{manifest}: {root / 'changed'}: checksum {checksum_file(root / 'changed')} does not match the manifest's "
        f"{outputs[1]['xxh3_64']} (corrupt copy)",
        f"{manifest}: {root / 'gone'} is missing",
        f"{manifest}: {root / 'shortened'}: size 5 bytes, expected {outputs[3]['bytes']}",
    ]
    assert main(["verify", str(manifest)]) == 1
    assert capsys.readouterr().out.splitlines() == [*problems, "1 manifests: 1 files match their checksums, "
                                                                "3 missing or differ"]
