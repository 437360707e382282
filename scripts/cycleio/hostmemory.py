"""Whether this machine hands the memory it frees back to its host: free page reporting.

A virtual machine whose balloon device reports free pages (virtio-balloon's ``VIRTIO_BALLOON_F_REPORTING``,
feature bit 5) gives every free 2 MiB block (``page_reporting_order`` 9) back to the host a moment after it
was freed; touching such a page again costs a fault on the host. The page cache takes its pages from the
same free pool, so a buffered write there runs at the speed of the guest's memory, not of its storage: on the
README's VM, writes into pages reported away went at about 350 MiB/s on every tier, into pages freed a moment
before at 1.3-1.8 GB/s, while the disk took the same files with O_DIRECT at 1.7-1.9 GB/s
(docs/performance.md). Which of the two a step or its replay meets depends on what was freed in the seconds
before it, so the study says in its provenance and its summary when this is so.
"""

from __future__ import annotations

from pathlib import Path

SYS = Path("/sys")
BALLOON_DEVICE_ID = 0x0005  # virtio device ID of a memory balloon
REPORTING_FEATURE_BIT = 5  # VIRTIO_BALLOON_F_REPORTING


def free_page_reporting(sys_root: Path = SYS) -> dict:
    """``{"free_page_reporting": bool, "page_reporting_order": int | None}``: whether a balloon device of this
    machine reports free pages to its host (``/sys/bus/virtio/devices/*/features``, a string of 0s and 1s by
    feature bit), and the smallest block it reports (a power of two in pages)."""
    reporting = False
    for device in sorted((sys_root / "bus/virtio/devices").glob("*")):
        try:
            if int((device / "device").read_text().strip(), 16) != BALLOON_DEVICE_ID:
                continue
            features = (device / "features").read_text().strip()
        except (OSError, ValueError):
            continue
        reporting |= len(features) > REPORTING_FEATURE_BIT and features[REPORTING_FEATURE_BIT] == "1"
    try:
        order = int((sys_root / "module/page_reporting/parameters/page_reporting_order").read_text())
    except (OSError, ValueError):
        order = None
    return {"free_page_reporting": reporting, "page_reporting_order": order if reporting else None}
