"""A slow tier for fault injection: a FUSE filesystem that passes every operation through to a folder
after a fixed delay (config ``faults.slow_tier``).

Run as its own process, ``python -m cycleio.storage.slowfs BACKING MOUNTPOINT --delay-ms N``, so the
step under test shares no interpreter with it; :func:`slow_mount` starts it, waits for the mount
and unmounts it after. Every call the kernel hands over (open, create, read, write, fsync, rename,
unlink, getattr, readdir, ...) sleeps ``delay`` seconds before doing its work on the backing folder,
as a congested or distant server answers late. Reads and writes arrive in pieces of at most the
FUSE request size (128 KiB by default), so a file of N such pieces pays at least N delays.

Needs /dev/fuse and libfuse 3 (Debian: fuse3), and root or fusermount3; mfusepy (ctypes) binds it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import psutil

from ..process import run_command

log = logging.getLogger("cycleio")

MOUNT_TIMEOUT_S = 30


def _operations(backing: str, delay: float):
    """The passthrough: each method gets paths relative to the mount ("/a/b"), sleeps, then works on the backing folder."""
    import functools

    from mfusepy import FuseOSError, Operations

    def slow(method):
        @functools.wraps(method)
        def late(self, *args):
            time.sleep(delay)
            try:
                return method(self, *args)
            except OSError as err:
                raise FuseOSError(err.errno or errno.EIO) from err
        return late

    def real(path: str) -> str:
        return backing + path

    class SlowPassthrough(Operations):
        use_ns = True

        @slow
        def access(self, path, amode):
            if not os.access(real(path), amode):
                raise FuseOSError(errno.EACCES)

        @slow
        def getattr(self, path, fh=None):
            st = os.fstat(fh) if fh is not None else os.lstat(real(path))
            return {key: getattr(st, key) for key in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size",
                                                      "st_atime_ns", "st_mtime_ns", "st_ctime_ns", "st_blocks")}

        @slow
        def readdir(self, path, fh):
            return [".", "..", *os.listdir(real(path))]

        @slow
        def statfs(self, path):
            st = os.statvfs(real(path))
            return {key: getattr(st, key) for key in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                                      "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax")}

        @slow
        def open(self, path, flags):
            return os.open(real(path), flags)

        @slow
        def create(self, path, mode, fi=None):
            return os.open(real(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)

        @slow
        def read(self, path, size, offset, fh):
            return os.pread(fh, size, offset)

        @slow
        def write(self, path, data, offset, fh):
            return os.pwrite(fh, data, offset)

        @slow
        def truncate(self, path, length, fh=None):
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(real(path), length)

        @slow
        def fsync(self, path, datasync, fh):
            (os.fdatasync if datasync else os.fsync)(fh)

        def flush(self, path, fh):
            return 0

        @slow
        def release(self, path, fh):
            os.close(fh)

        @slow
        def fallocate(self, path, mode, offset, size, fh):
            os.posix_fallocate(fh, offset, size)

        @slow
        def rename(self, old, new):
            os.replace(real(old), real(new))

        @slow
        def unlink(self, path):
            os.unlink(real(path))

        @slow
        def mkdir(self, path, mode):
            os.mkdir(real(path), mode)

        @slow
        def rmdir(self, path):
            os.rmdir(real(path))

        @slow
        def chmod(self, path, mode):
            os.chmod(real(path), mode)

        @slow
        def chown(self, path, uid, gid):
            os.chown(real(path), uid, gid)

        @slow
        def utimens(self, path, times=None):
            os.utime(real(path), ns=times)

        def fsyncdir(self, path, datasync, fh):
            return 0

    return SlowPassthrough()


def serve(backing: Path, mountpoint: Path, delay_ms: float) -> None:
    """Mount and serve until unmounted (foreground, one thread per request)."""
    from mfusepy import FUSE

    FUSE(_operations(str(backing.resolve()), delay_ms / 1000), str(mountpoint), foreground=True, nothreads=False)


def _mounted(mountpoint: Path) -> bool:
    target = str(mountpoint.resolve())
    return any(part.mountpoint == target for part in psutil.disk_partitions(all=True))


def unavailable() -> str | None:
    """Why a slow tier cannot be mounted here, or None."""
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse"
    if os.geteuid() != 0 and not shutil.which("fusermount3"):
        return "no fusermount3 (Debian: apt-get install fuse3), and not root"
    from ctypes.util import find_library

    if not find_library("fuse3"):
        return "no libfuse 3 (Debian: apt-get install fuse3)"
    return None


@contextlib.contextmanager
def slow_mount(backing: Path, delay_ms: float) -> Iterator[Path]:
    """A mount point through which ``backing`` answers each operation ``delay_ms`` late."""
    mountpoint = Path(tempfile.mkdtemp(prefix="cycleio-slow-"))
    server = subprocess.Popen([sys.executable, "-m", "cycleio.storage.slowfs", str(backing), str(mountpoint),
                               "--delay-ms", str(delay_ms)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not _mounted(mountpoint):
            if server.poll() is not None or time.monotonic() > deadline:
                raise OSError(errno.EIO, f"the slow tier (config faults.slow_tier) did not mount over {backing}: "
                              f"{(server.stderr.read() if server.poll() is not None else 'timed out').strip()[-500:]}")
            time.sleep(0.05)
        log.info("injected fault (config faults.slow_tier): %s answers each operation %g ms late, through %s",
                 backing, delay_ms, mountpoint)
        yield mountpoint
    finally:
        if _mounted(mountpoint):
            unmount = ["umount", str(mountpoint)] if os.geteuid() == 0 else ["fusermount3", "-u", str(mountpoint)]
            try:
                unmounted = run_command(unmount, timeout=MOUNT_TIMEOUT_S, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL).returncode == 0
            except subprocess.TimeoutExpired:  # a server that no longer answers: detach it lazily
                unmounted = False
            if not unmounted:
                run_command([*unmount[:-1], "-l" if unmount[0] == "umount" else "-z", str(mountpoint)],
                            timeout=MOUNT_TIMEOUT_S, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            server.wait(timeout=MOUNT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        with contextlib.suppress(OSError):
            mountpoint.rmdir()


@contextlib.contextmanager
def slowed(folder: Path, delay_ms: float | None) -> Iterator[Path]:
    """The folder a step runs in for fault injection (config ``faults.slow_tier``): ``folder``, or with
    ``delay_ms`` set the same folder through a mount answering each operation that late."""
    if delay_ms is None:
        yield folder
        return
    with slow_mount(folder, delay_ms) as mountpoint:
        yield mountpoint


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backing", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("--delay-ms", type=float, required=True)
    args = parser.parse_args(argv)
    serve(args.backing, args.mountpoint, args.delay_ms)


if __name__ == "__main__":
    main()
