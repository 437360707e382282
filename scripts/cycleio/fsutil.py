"""File-system primitives that lose nothing: write to a temporary name, fsync, rename."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Iterator

log = logging.getLogger("cycleio")


def fsync_file(path: str | os.PathLike) -> None:
    """Write a file's data to storage (an fsync through a descriptor of its own)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a rename durable by syncing its directory (not every filesystem allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_name(final: Path) -> Path:
    """A hidden sibling name that never matches the final name, unique per process.

    rsync's form (".name.SUFFIX", no dot in the suffix): GlusterFS's DHT places such a file on the
    brick of "name", so the rename is local; with "name.tmp.PID" 24 of 40 renames left a link file
    on a second brick here, an extra lookup on every later access.
    """
    return final.with_name(f".{final.name}.tmp-{os.getpid()}")


_TEMPORARY = re.compile(r"^\..+\.tmp-\d+$")


def is_temporary(name: str) -> bool:
    """Whether a file name is one of temp_name's (a copy or write that never finished)."""
    return bool(_TEMPORARY.match(name))


def final_path(path: str) -> str:
    """The path a temp_name stands in for (the path itself when it is none): where a landed file ends up."""
    folder, _, name = path.rpartition("/")
    if not is_temporary(name):
        return path
    final = name[1:].rpartition(".tmp-")[0]
    return f"{folder}/{final}" if folder else final


def discard(path: Path) -> None:
    """Remove a temporary while handling another error: never raise over that error.

    On a network filesystem the server holding the file may be the failure (a GlusterFS brick
    down: ENOTCONN), so the unlink fails too; the rerun removes what is left
    (staging.remove_stale_temporaries).
    """
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        log.warning("could not remove the temporary %s: [Errno %s] %s; a rerun removes it", path, err.errno,
                    err.strerror or err)


@contextlib.contextmanager
def landing(final: str | os.PathLike, timing: dict | None = None) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; on success fsync it and rename it into place.

    On any error the temporary file is removed, so no partial file ever has the final name.
    ``timing`` gets ``rename_s``: the seconds of the rename and the directory's sync, the cost of
    landing safely that a plain write (and a replay by fio) does not have.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_name(final)
    try:
        yield tmp
        fsync_file(tmp)
        t0 = time.perf_counter()
        os.replace(tmp, final)
        fsync_dir(final.parent)
        if timing is not None:
            timing["rename_s"] = time.perf_counter() - t0
    except OSError as err:
        discard(tmp)
        named = naming(err, final)
        if named is err:
            raise
        raise named from err
    except BaseException:
        discard(tmp)
        raise


def naming(err: OSError, path: Path) -> OSError:
    """``err`` naming the file it happened to, with its errno where a library hid it in the text
    (HDF5: "... errno = 28, error message = 'No space left on device'")."""
    if err.filename is not None and err.errno is not None:
        return err
    code = err.errno
    if code is None:
        found = re.search(r"errno = (\d+)", str(err))
        code = int(found.group(1)) if found else None
    if code is None:
        return OSError(f"{err} (writing {path})")
    detail = str(err) if err.errno is None else err.strerror
    reason = os.strerror(code) if detail in (None, "", os.strerror(code)) else f"{os.strerror(code)}: {detail}"
    return OSError(code, reason, str(path))


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    with landing(path) as tmp:
        tmp.write_text(text)


def replace_between_markers(path: Path, start: str, end: str, text: str, what: str) -> None:
    """Replace what lies between the ``start`` and ``end`` marker lines of a file (a generated part of a page,
    ``what``) with ``text``, landing the file safely."""
    page = path.read_text()
    if start not in page or end not in page:
        raise ValueError(f"{path} has no {start} ... {end} markers for {what}")
    head, rest = page.split(start, 1)
    _, tail = rest.split(end, 1)
    write_text_atomic(path, f"{head}{start}\n{text}{end}{tail}")


def write_table(frame, path: str | os.PathLike) -> None:
    """A pandas DataFrame landed safely without its index: Parquet where ``path`` ends in .parquet, else CSV.
    Every table the study writes goes through here."""
    path = Path(path)
    with landing(path) as tmp:
        if path.suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def remove_tree(path: Path) -> int:
    """Remove a folder and all it holds (scratch); return how many files it held, for the record."""
    if not path.exists():
        return 0
    files = sum(len(names) for _, _, names in os.walk(path))
    shutil.rmtree(path)
    return files
