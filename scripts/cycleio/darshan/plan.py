"""A Darshan log as per-rank lists of operations: what each replay rank will issue, in its order.

The replay works at the layer that reaches the file system: a file's POSIX records (what the MPI-IO
library, collective buffering included, and HDF5 or netCDF issued on the logged machine), its STDIO
records, and only for a file with MPI-IO records and no POSIX ones, its MPI-IO records, issued as POSIX
calls. Per file the operations come from:

- DXT (``source = dxt``): the file's traced reads and writes, each rank's in its own order, with the
  logged offsets, lengths and start and end times, when DXT_POSIX traced as many calls as the counters
  counted and the module is not marked partial.
- the counters (``source = counters``; ``counters, DXT truncated`` where a trace was there but short or
  partial), by the rule in docs/darshan.md: the record's calls and bytes per direction exactly; the
  sizes from its most common access sizes placed in their histogram bins, the other calls in their bins
  sized alike so the bytes add up; offsets consecutive for the consecutive share, then sequential with
  even gaps up to the largest byte the log saw, then rewinding; the opens, stats, seeks and fsyncs
  spread evenly over the calls; times spread evenly over the record's open-to-close window.

The log's ranks are dealt over the replay's (log rank r to replay rank r mod N); a shared file's
counter record (rank -1: every rank's together) is cut into N contiguous pieces, one per replay rank. A
replay rank that holds several log ranks issues their operations merged by logged start time.
With ``layer = mpiio`` a file with MPI-IO records is replayed through MPI-IO instead (its POSIX records left
out): its calls flagged collective (``coll``: the record's collective count of its largest calls), a shared
record dealt call by call, and ``Plan.mpiio`` gives the rank program each file's collective rounds.

``scale`` multiplies every offset and length, below 1 to fit a large job on small storage, above 1 to make a
small job's I/O long enough to time (rounded so each file's bytes stay within a byte per rank of S times the
logged; every call is kept); ``timing = logged`` keeps the logged gaps between a rank's operations,
multiplied by the scale, as compute; ``io`` drops them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from .logs import DIRECTIONS, DXT_MODULES, PREFIX, SIZE_BINS, DarshanLogError, JobLog, files_of, set_apart_note

READ, WRITE, OPEN, STAT, SEEK, FSYNC = range(6)
DATA_KINDS = (READ, WRITE)
TIMINGS = ("io", "logged")
LAYERS = ("posix", "mpiio")
COLUMNS = ("file", "kind", "offset", "length", "start", "end")


@dataclass
class ReplayFile:
    """One file of the replay: the logged name and what the log says of it, where it lands in the replay's folder."""

    index: int
    name: str
    module: str
    source: str
    path: str                                   # relative to the replay's folder
    logged_bytes: dict[str, int] = field(default_factory=dict)
    logged_ops: dict[str, int] = field(default_factory=dict)
    read_extent: int = 0                        # bytes the replay lays out before it starts (its reads reach that far)
    extent: int = 0                             # the file's largest size in the replay


@dataclass
class Plan:
    files: list[ReplayFile]
    ranks: list[dict[str, np.ndarray]]          # per replay rank: file, kind, offset, length, gap_s
    nranks: int
    scale: float
    timing: str
    log_ranks: int
    notes: list[str] = field(default_factory=list)
    layer: str = "posix"
    # MPI-IO files (layer mpiio): index -> {"rounds": {direction: collective calls of the busiest rank}, "order": [...]}
    mpiio: dict[int, dict] = field(default_factory=dict)

    @property
    def n_ops(self) -> int:
        return sum(len(rank["kind"]) for rank in self.ranks)

    def bytes(self, direction: str) -> int:
        kind = READ if direction == "read" else WRITE
        return int(sum(rank["length"][rank["kind"] == kind].sum() for rank in self.ranks))

    def room_bytes(self, block: int = 4096) -> int:
        """What the replay's files take at their largest, each rounded up to whole blocks."""
        return sum(-(-f.extent // block) * block for f in self.files)


def _safe_name(index: int, name: str) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", name.rstrip("/").rsplit("/", 1)[-1]).lstrip(".") or "file"
    return f"{index:05d}-{base[:80]}"


# ------------------------------------------------------------------ sizes and offsets from the counters

def _bin_of(size: int) -> int:
    for index, (_, low, high) in enumerate(SIZE_BINS):
        if low <= size <= high:
            return index
    return len(SIZE_BINS) - 1


def _fill(total: int, lows: np.ndarray, highs: np.ndarray) -> np.ndarray | None:
    """Sizes within [lows, highs] (per call) adding up to ``total``, as alike as the bounds allow; None if none can."""
    if not len(lows):
        return np.zeros(0, dtype=np.int64) if total == 0 else None
    low_sum, room = int(lows.sum()), (highs - lows).astype(float)
    if total < low_sum or total > low_sum + room.sum():
        return None
    alpha = (total - low_sum) / room.sum() if room.sum() > 0 else 0.0
    sizes = np.minimum(lows + np.floor(room * alpha).astype(np.int64), highs)
    short = total - int(sizes.sum())
    if short:  # a byte more for the first calls that have room, until the total is met
        spare = np.flatnonzero(sizes < highs)
        sizes[spare[:short]] += 1
    return sizes


def synthesise_sizes(n: int, total: int, hist: list[int] | None, common: dict[int, int]) -> np.ndarray:
    """``n`` call sizes adding up to ``total`` bytes: the common sizes where their bin has calls left (``common`` is
    consumed: reads and writes share it), the rest of each bin's calls sized alike within the bin. Without a
    histogram that agrees with ``n``, the calls are sized alike."""
    if n <= 0:
        return np.zeros(0, dtype=np.int64)
    if hist is not None and sum(hist) == n:
        left = list(hist)
        fixed: list[int] = []
        for size, count in list(common.items()):
            b = _bin_of(size)
            take = min(count, left[b])
            if take > 0:
                fixed += [size] * take
                left[b] -= take
                common[size] -= take
        lows = np.repeat([low for _, low, _ in SIZE_BINS], left).astype(np.int64)
        highs = np.repeat([high for _, _, high in SIZE_BINS], left).astype(np.int64)
        rest = _fill(total - sum(fixed), lows, highs)
        if rest is not None:
            return np.concatenate([np.asarray(fixed, dtype=np.int64), rest])
        every = _fill(total, np.repeat([low for _, low, _ in SIZE_BINS], hist).astype(np.int64),
                      np.repeat([high for _, _, high in SIZE_BINS], hist).astype(np.int64))
        if every is not None:
            return every
    sizes = np.full(n, total // n, dtype=np.int64)
    sizes[: total - int(sizes.sum())] += 1
    return sizes


def synthesise_offsets(sizes: np.ndarray, extent: int, consecutive: int, sequential: int) -> np.ndarray:
    """Offsets for calls of ``sizes`` in order: the first at 0, then ``consecutive`` calls each where the last
    ended, then the rest of the ``sequential`` calls forward with even gaps so the last ends near ``extent``
    (the largest byte the log saw, plus one), then the others rewinding to the start and going on from there."""
    n = len(sizes)
    offsets = np.zeros(n, dtype=np.int64)
    if n == 0:
        return offsets
    consecutive = int(min(max(consecutive, 0), n - 1))
    forward = int(min(max(sequential, consecutive), n - 1))
    gapped = forward - consecutive
    ahead = 1 + forward
    spare = max(0, extent - int(sizes[:ahead].sum()))
    gaps = np.zeros(ahead, dtype=np.int64)
    if gapped:
        gaps[1 + consecutive: ahead] = spare // gapped
    ends = np.cumsum(sizes[:ahead] + gaps)
    offsets[:ahead] = ends - sizes[:ahead]
    if n > ahead:  # rewinding: from 0 again, consecutive, wrapping at the extent
        rest = sizes[ahead:]
        starts = np.concatenate([[0], np.cumsum(rest)[:-1]])
        if extent > 0:
            starts = starts % max(extent, 1)
        offsets[ahead:] = np.where(starts + rest > max(extent, 1), np.maximum(0, extent - rest), starts)
    return offsets


# ------------------------------------------------------------------ streams: one log rank's calls on one file

def _stream(file: int, kinds, offsets, lengths, starts, ends) -> dict[str, np.ndarray]:
    return {"file": np.full(len(kinds), file, dtype=np.int32), "kind": np.asarray(kinds, dtype=np.int8),
            "offset": np.asarray(offsets, dtype=np.int64), "length": np.asarray(lengths, dtype=np.int64),
            "start": np.asarray(starts, dtype=float), "end": np.asarray(ends, dtype=float)}


def _with_meta(stream: dict[str, np.ndarray], opens: int, stats: int, seeks: int, fsyncs: int,
               at: float) -> dict[str, np.ndarray]:
    """The stream with its metadata calls: opens (each with its stats) spread evenly before the calls, seeks
    likewise, fsyncs after the writes, evenly among them. A call's time is the one of the call it comes before."""
    m = len(stream["kind"])
    positions, kinds = [], []
    for count, kind in ((opens, OPEN), (stats, STAT), (seeks, SEEK)):
        if count > 0:
            positions.append(np.floor(np.arange(count) * (m / count)).astype(np.int64))
            kinds.append(np.full(count, kind, dtype=np.int8))
    writes = np.flatnonzero(stream["kind"] == WRITE)
    if fsyncs > 0:
        if len(writes):
            picks = writes[np.minimum(len(writes) - 1, np.floor((np.arange(fsyncs) + 1) * len(writes) / fsyncs)
                                      .astype(np.int64) - 1)]
            positions.append(picks + 1)
        else:
            positions.append(np.full(fsyncs, m, dtype=np.int64))
        kinds.append(np.full(fsyncs, FSYNC, dtype=np.int8))
    if not positions:
        return stream
    pos = np.concatenate(positions)
    kind = np.concatenate(kinds)
    order = np.argsort(pos, kind="stable")
    pos, kind = pos[order], kind[order]
    times = np.concatenate([stream["start"], [stream["end"][-1] if m else at]])[pos]
    out = {"kind": np.insert(stream["kind"], pos, kind), "offset": np.insert(stream["offset"], pos, 0),
           "length": np.insert(stream["length"], pos, 0), "start": np.insert(stream["start"], pos, times),
           "end": np.insert(stream["end"], pos, times)}
    out["file"] = np.full(len(out["kind"]), stream["file"][0] if m else 0, dtype=np.int32)
    return out


def _record_meta(record: dict, module: str) -> tuple[int, int, int, int]:
    p = PREFIX[module]
    if module == "MPI-IO":
        return (int(_value(record, "MPIIO_INDEP_OPENS") + _value(record, "MPIIO_COLL_OPENS")), 0, 0,
                int(_value(record, "MPIIO_SYNCS")))
    return (int(_value(record, f"{p}_OPENS")), int(_value(record, f"{p}_STATS")), int(_value(record, f"{p}_SEEKS")),
            int(_value(record, f"{p}_FSYNCS") + _value(record, f"{p}_FDSYNCS")))


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def _value(record: dict, column: str, default: float = 0.0) -> float:
    value = record.get(column, default)
    return default if value is None or value != value or value < 0 else float(value)


def _record_common(record: dict, module: str) -> dict[int, int]:
    p = PREFIX[module]
    out: dict[int, int] = {}
    for slot in range(1, 5):
        size, count = _value(record, f"{p}_ACCESS{slot}_ACCESS", -1), int(_value(record, f"{p}_ACCESS{slot}_COUNT"))
        if count > 0 and size >= 0:
            out[int(size)] = out.get(int(size), 0) + count
    return dict(sorted(out.items(), key=lambda item: -item[1]))


def _record_ops(record: dict, module: str, direction: str) -> int:
    verb = "READS" if direction == "read" else "WRITES"
    if module == "MPI-IO":
        return int(sum(_value(record, f"MPIIO_{kind}_{verb}") for kind in ("INDEP", "COLL", "SPLIT", "NB")))
    return int(_value(record, f"{PREFIX[module]}_{verb}"))


def _counter_streams(index: int, record: dict, module: str, log_ranks: int, nranks: int,
                     round_robin: bool = False) -> list[tuple[int, dict]]:
    """(replay rank, stream) pairs synthesised from one record's counters. A shared record's calls are cut into
    contiguous pieces, one per replay rank, or with ``round_robin`` dealt call by call (call k to rank k mod N:
    each round of collective calls then covers one contiguous stretch of the file)."""
    p = PREFIX[module]
    common = _record_common(record, module) if module != "STDIO" else {}
    data: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for direction, kind in (("read", READ), ("write", WRITE)):
        n = _record_ops(record, module, direction)
        verb = "READ" if direction == "read" else "WRITTEN"
        total = int(_value(record, f"{p}_BYTES_{verb}"))
        hist_verb = ("READ" if direction == "read" else "WRITE") + ("_AGG" if module == "MPI-IO" else "")
        hist = None if module == "STDIO" else [int(_value(record, f"{p}_SIZE_{hist_verb}_{b}"))
                                                for b, _, _ in SIZE_BINS]
        sizes = synthesise_sizes(n, total, hist, common)
        extent = int(_value(record, f"{p}_MAX_BYTE_{verb}", -1)) + 1
        word = "READS" if direction == "read" else "WRITES"
        consec = int(_value(record, f"{p}_CONSEC_{word}", n))
        seq = int(_value(record, f"{p}_SEQ_{word}", n))
        data[kind] = (sizes, synthesise_offsets(sizes, max(extent, 0), consec, seq))
    first = [k for k in (READ, WRITE) if len(data[k][0])]
    starts = {k: _value(record, f"{p}_F_{'READ' if k == READ else 'WRITE'}_START_TIMESTAMP") for k in (READ, WRITE)}
    first.sort(key=lambda k: starts[k])
    shared = int(record["rank"]) == -1
    pieces = nranks if shared else 1
    opens, stats, seeks, fsyncs = _record_meta(record, module)
    window_start = _value(record, f"{p}_F_OPEN_START_TIMESTAMP")
    window_end = max(_value(record, f"{p}_F_{w}_END_TIMESTAMP") for w in ("CLOSE", "READ", "WRITE", "OPEN"))
    window_end = max(window_end, window_start)
    busy = sum(_value(record, f"{p}_F_{w}_TIME") for w in ("READ", "WRITE", "META"))
    if shared:
        busy /= max(log_ranks, 1)  # one rank's share: the ranks ran side by side
    out = []
    split_opens, split_stats, split_seeks, split_fsyncs = (_split(c, pieces) for c in (opens, stats, seeks, fsyncs))
    kinds_all = np.concatenate([np.full(len(data[k][0]), k, dtype=np.int8) for k in first] or [np.zeros(0, np.int8)])
    sizes_all = np.concatenate([data[k][0] for k in first] or [np.zeros(0, np.int64)])
    offsets_all = np.concatenate([data[k][1] for k in first] or [np.zeros(0, np.int64)])
    bounds = np.linspace(0, len(kinds_all), pieces + 1).round().astype(int)
    for piece in range(pieces):
        mine = slice(piece, None, pieces) if round_robin else slice(bounds[piece], bounds[piece + 1])
        m = len(kinds_all[mine])
        spacing = (window_end - window_start) / m if m else 0.0
        duration = min(spacing, busy / m) if m else 0.0
        starts_ = window_start + np.arange(m) * spacing
        stream = _stream(index, kinds_all[mine], offsets_all[mine], sizes_all[mine], starts_, starts_ + duration)
        stream = _with_meta(stream, split_opens[piece], split_stats[piece], split_seeks[piece], split_fsyncs[piece],
                            window_start)
        stream["file"][:] = index
        rank = piece if shared else int(record["rank"]) % nranks
        if len(stream["kind"]):
            out.append((rank, stream))
    return out


def _sum_meta(records: list[dict], module: str) -> tuple[int, ...]:
    return tuple(sum(values) for values in zip((0, 0, 0, 0), *(_record_meta(r, module) for r in records)))


def _dxt_streams(index: int, traces: list[dict], records: list[dict], nranks: int) -> list[tuple[int, dict]]:
    """(replay rank, stream) pairs from a file's DXT_POSIX records, with the metadata calls of its counters."""
    out = []
    shared_meta = _sum_meta([r for r in records if int(r["rank"]) == -1], "POSIX")
    per_trace = [_split(c, len(traces)) for c in shared_meta]
    for number, trace in enumerate(traces):
        parts = []
        for kind, key in ((READ, "read_segments"), (WRITE, "write_segments")):
            seg = trace[key]
            if len(seg):
                parts.append(_stream(index, np.full(len(seg), kind), seg["offset"].to_numpy(), seg["length"].to_numpy(),
                                     seg["start_time"].to_numpy(), seg["end_time"].to_numpy()))
        if not parts:
            continue
        stream = {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}
        order = np.argsort(stream["start"], kind="stable")
        stream = {k: v[order] for k, v in stream.items()}
        meta = _sum_meta([r for r in records if int(r["rank"]) == int(trace["rank"])], "POSIX")
        meta = tuple(a + b[number] for a, b in zip(meta, per_trace))
        stream = _with_meta(stream, *meta, at=float(stream["start"][0]))
        stream["file"][:] = index
        out.append((int(trace["rank"]) % nranks, stream))
    return out


def _mark_collective(streams: list[dict], records: list[dict]) -> dict[str, int]:
    """Flag (``coll``) which of an MPI-IO file's calls were collective: per direction, the record's collective
    count of its largest calls (Darshan counts collective and independent calls, not which call was which);
    the others are independent. Returns the collective calls per direction."""
    out = {}
    for stream in streams:
        stream["coll"] = np.zeros(len(stream["kind"]), dtype=np.int8)
    for direction, kind in (("read", READ), ("write", WRITE)):
        word = "READS" if direction == "read" else "WRITES"
        wanted = int(sum(_value(r, f"MPIIO_COLL_{word}") + _value(r, f"MPIIO_SPLIT_{word}") for r in records))
        where = [(s, i) for s in streams for i in np.flatnonzero(s["kind"] == kind)]
        wanted = min(wanted, len(where))
        out[direction] = wanted
        if not wanted:
            continue
        lengths = np.array([s["length"][i] for s, i in where])
        for pick in np.argsort(-lengths, kind="stable")[:wanted]:
            stream, i = where[pick]
            stream["coll"][i] = 1
    return out


def _scaled(streams: list[dict], scale: float) -> None:
    """Offsets and lengths times ``scale``, in place; each stream's lengths rounded as a running sum, so its bytes
    are within one byte of ``scale`` times the logged."""
    if scale == 1.0:
        return
    for stream in streams:
        stream["offset"] = np.floor(stream["offset"] * scale).astype(np.int64)
        for kind in DATA_KINDS:
            mask = stream["kind"] == kind
            if mask.any():
                running = np.floor(np.cumsum(stream["length"][mask]) * scale + 0.5).astype(np.int64)
                stream["length"][mask] = np.diff(running, prepend=0)


def _merged(streams: list[dict], scale: float, timing: str) -> dict[str, np.ndarray]:
    """A replay rank's streams merged by logged start time, with the gap before each call (timing logged)."""
    if not streams:
        return {"file": np.zeros(0, np.int32), "kind": np.zeros(0, np.int8), "offset": np.zeros(0, np.int64),
                "length": np.zeros(0, np.int64), "gap_s": np.zeros(0), "coll": np.zeros(0, np.int8)}
    for stream in streams:
        stream.setdefault("coll", np.zeros(len(stream["kind"]), dtype=np.int8))
    merged = {k: np.concatenate([s[k] for s in streams]) for k in (*COLUMNS, "coll")}
    order = np.argsort(merged["start"], kind="stable")
    merged = {k: v[order] for k, v in merged.items()}
    gap = np.zeros(len(order))
    if timing == "logged" and len(order) > 1:
        busy_until = np.maximum.accumulate(merged["end"])
        gap[1:] = np.maximum(0.0, merged["start"][1:] - busy_until[:-1]) * scale
    return {"file": merged["file"], "kind": merged["kind"], "offset": merged["offset"], "length": merged["length"],
            "gap_s": gap, "coll": merged["coll"]}


def option(name: str, value) -> str:
    """How the command names a request's setting in a message (``--ranks 8``); a study names its config key."""
    return f"--{name} {value}"


def check_request(log: JobLog, nranks: int, scale: float, timing: str, layer: str = "posix", say=option) -> None:
    """DarshanLogError unless the request fits the log; ``say(name, value)`` names a setting in the message."""
    if layer not in LAYERS:
        raise DarshanLogError(f"{say('layer', repr(layer))}: expected one of {', '.join(LAYERS)}")
    if timing not in TIMINGS:
        raise DarshanLogError(f"{say('timing', repr(timing))}: expected one of {', '.join(TIMINGS)}")
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and 0 < scale):
        raise DarshanLogError(f"{say('scale', scale)}: expected a number above 0 (e.g. 0.01 for a "
                              f"hundredth of every file and operation, 10 for ten times their sizes)")
    if nranks < 1:
        raise DarshanLogError(f"{say('ranks', nranks)}: expected at least 1")
    if nranks > max(log.nprocs, 1):
        raise DarshanLogError(f"{say('ranks', nranks)}: the log's job ran {log.nprocs} "
                              f"rank{'s' if log.nprocs != 1 else ''} ({log.path.name}); expected at most "
                              f"{log.nprocs} replay ranks (its ranks are dealt over the replay's)")


def make_plan(log: JobLog, nranks: int = 1, scale: float = 1.0, timing: str = "io", layer: str = "posix",
              say=option) -> Plan:
    """The replay of ``log`` on ``nranks`` ranks at ``scale``: see the module's docstring (``say``: check_request's)."""
    check_request(log, nranks, scale, timing, layer, say)
    files: list[ReplayFile] = []
    per_rank: list[list[dict]] = [[] for _ in range(nranks)]
    notes: list[str] = []
    posix_names = set(files_of(log, "POSIX")["file"]) if "POSIX" in log.counters else set()
    mpiio_names = set(files_of(log, "MPI-IO")["file"]) if layer == "mpiio" and "MPI-IO" in log.counters else set()
    traces: dict[str, dict[str, list[dict]]] = {"POSIX": {}, "MPI-IO": {}}
    for module in traces:
        for trace in log.dxt.get(DXT_MODULES[module], []):
            traces[module].setdefault(trace["file"], []).append(trace)
    mpiio: dict[int, dict] = {}
    truncated = 0
    for module in ("POSIX", "STDIO", "MPI-IO"):
        table = files_of(log, module)
        if table.empty:
            continue
        by_name: dict[str, list[dict]] = {}
        for record in table.to_dict("records"):
            by_name.setdefault(record["file"], []).append(record)
        for name, records in by_name.items():
            if module == "MPI-IO" and name in posix_names and name not in mpiio_names:
                continue  # replayed from the POSIX calls beneath it
            if module != "MPI-IO" and name in mpiio_names:
                continue  # replayed through MPI-IO (layer mpiio): its POSIX calls are the library's
            index = len(files)
            logged_ops = {d: sum(_record_ops(r, module, d) for r in records) for d in DIRECTIONS}
            verbs = {"read": "READ", "write": "WRITTEN"}
            logged_bytes = {d: int(sum(_value(r, f"{PREFIX[module]}_BYTES_{verbs[d]}") for r in records))
                            for d in DIRECTIONS}
            source = "counters"
            mine = traces.get(module, {}).get(name)
            if mine and module in ("POSIX", "MPI-IO"):
                traced = sum(len(t["read_segments"]) + len(t["write_segments"]) for t in mine)
                if log.dxt_partial(module) or traced < sum(logged_ops.values()):
                    source = "counters, DXT truncated"
                    truncated += 1
                else:
                    source = "dxt"
            through_mpiio = module == "MPI-IO" and name in mpiio_names
            if source == "dxt":
                pairs = _dxt_streams(index, mine, [] if through_mpiio else records, nranks)
            else:
                pairs = [pair for record in records
                         for pair in _counter_streams(index, record, module, log.nprocs, nranks,
                                                      round_robin=through_mpiio)]
            if through_mpiio:  # opens, closes (and syncs) are the collective open and close of the file
                pairs = [(rank, {k: v[np.isin(s["kind"], DATA_KINDS)] for k, v in s.items()}) for rank, s in pairs]
                collective = _mark_collective([s for _, s in pairs], records)
            _scaled([stream for _, stream in pairs], scale)
            file = ReplayFile(index=index, name=name, module=module, source=source, path=_safe_name(index, name),
                              logged_bytes=logged_bytes, logged_ops=logged_ops)
            for rank, stream in pairs:
                data = np.isin(stream["kind"], DATA_KINDS)
                if data.any():
                    ends = stream["offset"][data] + stream["length"][data]
                    file.extent = max(file.extent, int(ends.max()))
                    reads = stream["kind"] == READ
                    if reads.any():
                        file.read_extent = max(file.read_extent, int((stream["offset"][reads] +
                                                                      stream["length"][reads]).max()))
                per_rank[rank].append(stream)
            if through_mpiio:
                rounds = {}
                for direction, kind in (("read", READ), ("write", WRITE)):
                    calls = [0] * nranks
                    for rank, stream in pairs:
                        calls[rank] += int(((stream["kind"] == kind) & (stream["coll"] == 1)).sum())
                    rounds[direction] = max(calls)
                firsts = {d: min([float(s["start"][s["kind"] == k].min()) for _, s in pairs if (s["kind"] == k).any()]
                                 or [np.inf]) for d, k in (("read", READ), ("write", WRITE))}
                mpiio[index] = {"rounds": rounds, "order": sorted(DIRECTIONS, key=lambda d: firsts[d]),
                                "collective": collective}
            files.append(file)
    if truncated:
        why = "module marked partial" if log.dxt_partial("POSIX") else "fewer calls traced than counted"
        notes.append(f"DXT trace truncated ({why}): {truncated} file{'s' if truncated > 1 else ''} replayed from "
                     f"the counters instead")
    apart = set_apart_note(log)
    notes += ([apart] if apart else []) + [f"not read: {warning}" for warning in log.warnings]
    ranks = [_merged(streams, scale, timing) for streams in per_rank]
    return Plan(files=files, ranks=ranks, nranks=nranks, scale=float(scale), timing=timing, log_ranks=log.nprocs,
                notes=notes, layer=layer, mpiio=mpiio)
