"""pydarshan's report of a Darshan log, read as darshan-parser reads it.

darshan-runtime writes a log's executable and mount table into one text region; when the command line it reads
from /proc/self/cmdline holds a newline (``python -c`` with a script, ``bash -c``), the runtime (3.4 and 3.5, in a
process without MPI) appends bytes from its own stack after it, and darshan-util reads them back as a mount table
entry that is not text. darshan-parser prints such bytes as they are; pydarshan decodes the mount table, the
executable and the file names as strict UTF-8 and refuses the whole log. ``LenientReport`` decodes them leniently,
and reads each module on its own: what it cannot decode (a mount table entry, a name, a module pydarshan does not
know or cannot read) is left out with a warning naming it, never the log.
"""

from __future__ import annotations

import datetime

import darshan
from darshan.backend import cffi_backend as backend


def _text(raw: bytes) -> tuple[str, bool]:
    """``raw`` as text, and whether it was text: bytes that are not UTF-8 shown as \\xNN escapes."""
    try:
        return raw.decode("utf-8"), True
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="backslashreplace"), False


class LenientReport(darshan.DarshanReport):
    """pydarshan's report of one log, its text decoded leniently and its modules read one by one; ``warnings`` says
    what was left out or shown with escapes (see the module's docstring)."""

    def __init__(self, filename: str):
        self.warnings: list[str] = []
        super().__init__(filename, read_all=True)

    def read_metadata(self):
        self.metadata["job"] = job = backend.log_get_job(self.log)
        self.start_time = datetime.datetime.fromtimestamp(job["start_time_sec"])
        self.end_time = datetime.datetime.fromtimestamp(job["end_time_sec"])
        exe = backend.ffi.new("char[]", 4096)
        backend.libdutil.darshan_log_get_exe(self.log["handle"], exe)
        self.metadata["exe"], text = _text(backend.ffi.string(exe))
        if not text:
            self.warnings.append(f"the executable's name is not UTF-8 text: shown with escapes "
                                 f"({self.metadata['exe']!r})")
        self.data["mounts"] = self.mounts = self._mount_table()
        self.data["modules"] = self._modules = backend.log_get_modules(self.log)

    def _mount_table(self) -> list[tuple[str, str]]:
        table = backend.ffi.new("struct darshan_mnt_info **")
        count = backend.ffi.new("int *")
        backend.libdutil.darshan_log_get_mounts(self.log["handle"], table, count)
        mounts = []
        try:
            for i in range(count[0]):
                entry = table[0][i]
                (path, path_ok), (kind, kind_ok) = (_text(backend.ffi.string(entry.mnt_path)),
                                                    _text(backend.ffi.string(entry.mnt_type)))
                if path_ok and kind_ok:
                    mounts.append((path, kind))
                else:
                    self.warnings.append(f"mount table entry {i + 1} is not text (mount point {path!r}, "
                                         f"type {kind!r}): left out")
        finally:
            backend.libdutil.darshan_free(table[0])
        return mounts

    def read_name_records(self, filter_patterns=None, filter_mode="exclude"):
        records = backend.ffi.new("struct darshan_name_record **")
        count = backend.ffi.new("int *")
        backend.libdutil.darshan_log_get_name_records(self.log["handle"], records, count)
        names, escaped = {}, []
        for i in range(count[0]):
            name, text = _text(backend.ffi.string(records[0][i].name))
            names[records[0][i].id] = name
            if not text:
                escaped.append(name)
            backend.libdutil.darshan_free(records[0][i].name)
        backend.libdutil.darshan_free(records[0])
        if escaped:
            self.warnings.append(f"{len(escaped)} file name{'s are' if len(escaped) > 1 else ' is'} not UTF-8, shown "
                                 f"with escapes: {', '.join(repr(n) for n in escaped[:3])}"
                                 + (" ..." if len(escaped) > 3 else ""))
        self.log["name_records"] = names
        self.data["name_records"] = self.name_records = names
        self.name_records_read = True

    def read_all(self, dtype=None, filter_patterns=None, filter_mode="exclude"):
        readers = {"LUSTRE": self.mod_read_all_lustre_records, "APMPI": self.mod_read_all_apmpi_records,
                   "APXC": self.mod_read_all_apxc_records, "HEATMAP": self.read_all_heatmap_records}
        for module in list(self.data["modules"]):
            try:
                if module in readers:
                    readers[module]()
                elif module.startswith("DXT_"):
                    self.mod_read_all_dxt_records(module, warnings=False)
                else:
                    self.mod_read_all_records(module, warnings=False)
            except Exception as err:  # a module pydarshan does not know, or cannot read: the others still can
                self.records.pop(module, None)
                self.warnings.append(f"module {module}: pydarshan cannot read its records ({type(err).__name__}: "
                                     f"{err}): left out")

    def decoded(self, module: str) -> int:
        """How many of the module's records pydarshan decoded (heatmaps: their records over all modules)."""
        if module == "HEATMAP":
            return sum(int(getattr(heatmap, "_num_recs", 1)) for heatmap in self.heatmaps.values())
        return len(self.records.get(module, []))
