"""Whether the machine hands freed memory to its host (cycleio.hostmemory), read from a sysfs tree laid out as
Linux lays it out (the real one is read in every job's provenance; a study on this repository's VM says True)."""

from __future__ import annotations

from cycleio.hostmemory import free_page_reporting


def sysfs(root, devices: dict[str, tuple[str, str]], order: str | None = "9"):
    for name, (device, features) in devices.items():
        folder = root / "bus/virtio/devices" / name
        folder.mkdir(parents=True)
        (folder / "device").write_text(device + "\n")
        (folder / "features").write_text(features + "\n")
    if order is not None:
        params = root / "module/page_reporting/parameters"
        params.mkdir(parents=True)
        (params / "page_reporting_order").write_text(order + "\n")
    return root


def test_a_balloon_with_the_reporting_feature_reports_free_pages(tmp_path):
    root = sysfs(tmp_path, {"virtio0": ("0x0005", "0110010100000000"), "virtio1": ("0x0002", "0000011111")})
    assert free_page_reporting(root) == {"free_page_reporting": True, "page_reporting_order": 9}


def test_no_balloon_or_one_without_the_feature_does_not(tmp_path):
    # a block device with bit 5 set is no balloon; a balloon with stats and deflate-on-oom only does not report
    assert free_page_reporting(sysfs(tmp_path / "a", {"virtio0": ("0x0002", "0000010000")})) == {
        "free_page_reporting": False, "page_reporting_order": None}
    assert free_page_reporting(sysfs(tmp_path / "b", {"virtio0": ("0x0005", "0110000")}))["free_page_reporting"] is False
    assert free_page_reporting(tmp_path / "no-sysfs") == {"free_page_reporting": False, "page_reporting_order": None}
