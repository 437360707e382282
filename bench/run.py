"""Run the benchmarks in bench/ and write RESULTS.md, results.json and results.png beside --out.

Every benchmark is a module bench/bench_<name>.py with ``run(args) -> list[dict]`` (rows as made
by common.row: value and baseline measured in the same run, ratio min/median/max over repeats,
goal) and runs alone too (``python bench/bench_<name>.py [--quick]``). A benchmark that fails is
recorded in RESULTS.md and the others still run; the driver then exits with status 1.

Run: make bench [BENCH_ARGS="--quick --only staging planning"]
     .venv/bin/python bench/run.py [--quick] [--only NAME ...] [--out bench/RESULTS.md]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

import psutil

import readme
from common import BENCH_TIERS, REPO, fio_version, passes

# (number, name, module): the benchmarks of this driver, in the order of the study's list.
BENCHMARKS = [
    (1, "efficiency", "bench_efficiency"),
    (2, "staging", "bench_staging"),
    (3, "planning", "bench_planning"),
    (4, "memory", "bench_memory"),
    (5, "aggregation", "bench_aggregation"),
    (6, "study", "bench_study"),
    (7, "soak", "bench_soak"),
    (8, "parallel", "bench_parallel"),
    (9, "darshan", "bench_darshan"),
]


def host() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown")
    mem_kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal"))
    return {"hostname": socket.gethostname(), "cpu": cpu, "cores": os.cpu_count(), "memory_GiB": mem_kib / 2**20,
            "kernel": platform.release(), "root": os.geteuid() == 0}


def mount_of(path: Path) -> dict:
    """The mount table's entry (psutil: its escapes decoded) with the longest mount point holding ``path``."""
    path = path.resolve()
    best = {"mount": "/", "device": "?", "fs_type": "?", "options": ""}
    for part in psutil.disk_partitions(all=True):
        mount = part.mountpoint
        if (path == Path(mount) or Path(mount) in path.parents) and len(mount) >= len(best["mount"]):
            best = {"mount": mount, "device": part.device, "fs_type": part.fstype, "options": part.opts}
    return best


def tiers() -> list[dict]:
    paths = [Path(os.environ.get("TMPDIR") or "/tmp"), Path("/dev/shm"), BENCH_TIERS, REPO / "results" / "tiers"]
    out = []
    for path in paths:
        probe = path if path.exists() else path.parent
        stat_f = subprocess.run(["stat", "-f", "-c", "%T", str(probe)], capture_output=True, text=True).stdout.strip()
        out.append({"path": str(path), "stat_f": stat_f, **mount_of(probe)})
    return out


def versions() -> dict:
    out = {"fio": fio_version(), "python": platform.python_version()}
    for name in ("netCDF4", "numpy", "pandas", "snakemake"):
        try:
            out[name] = importlib.import_module(name).__version__
        except Exception as err:  # noqa: BLE001 - a version line must not stop the run
            out[name] = f"unavailable ({err})"
    return out


def command() -> str:
    argv = shlex.join([os.path.relpath(sys.executable, REPO), os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]])
    return f"make bench (ran: {argv})" if os.environ.get("MAKELEVEL") else argv


def fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def markdown(meta: dict, rows: list[dict], errors: dict[str, str], runs: dict[str, float]) -> str:
    h = meta["host"]
    lines = ["# cycleio benchmarks", "",
             f"- host: {h['hostname']}, {h['cpu']}, {h['cores']} cores, {h['memory_GiB']:.1f} GiB memory, "
             f"kernel {h['kernel']}, root: {h['root']} (page cache dropped between runs only as root)",
             f"- load average (1 min) at start {meta['load_average']['start']:.2f}, at end "
             f"{meta['load_average']['end']:.2f} (other work on the host disturbs every number)",
             f"- date: {meta['date']}", f"- command: `{meta['command']}`" + (" (--quick: smoke version)"
                                                                             if meta["quick"] else ""),
             "- versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()), "- tiers:", ""]
    lines += ["| path | `stat -f` | /proc/mounts type | mount point | device | options |", "|---|---|---|---|---|---|"]
    lines += [f"| {t['path']} | {t['stat_f']} | {t['fs_type']} | {t['mount']} | {t['device']} | {t['options']} |"
              for t in meta["tiers"]]
    lines += ["", "Each ratio is measured / baseline, paired within a repeat; the table gives min / median / max "
              "over the repeats and judges the median against the goal. Measured and baseline columns are "
              "medians. See results.png for all ratios at once.", ""]
    for number, name, module in BENCHMARKS:
        if name not in runs:
            continue
        mine = [r for r in rows if r["_run"] == name]
        title = mine[0]["benchmark"] if mine else name
        try:
            doc = " ".join((importlib.import_module(module).__doc__ or "").split("\n\n")[0].split())
        except Exception:  # noqa: BLE001 - the module itself may be what failed
            doc = ""
        kept = meta.get("kept", {}).get(name)
        took = (f"Took {runs[name]:.0f} s" if runs[name] else "Measured") + (
            f" in the run of {kept} (not rerun by this --only)." if kept else ".")
        lines += [f"## ({number}) {title}", "", doc, "", took, ""]
        if name in errors:
            lines += ["**FAILED**:", "", "```", errors[name].rstrip(), "```", ""]
            continue
        better = {r.get("higher_is_better", True) for r in mine}
        if better == {False}:
            lines += ["Lower is better: ratio = measured / baseline (where the baseline is a goal, the goal itself).", ""]
        lines += ["| case | measured | baseline | ratio min / median / max | goal | result |",
                  "|---|---:|---:|---:|---:|---|"]
        for r in mine:
            verdict = {True: "pass", False: "**FAIL**", None: "(no goal)"}[passes(r)]
            sign = ">=" if r.get("higher_is_better", True) else "<="
            goal = "-" if r["goal"] is None else f"{sign} {r['goal']:.2f}"
            lines.append(f"| {r['case']} | {fmt(r['value'])} {r['unit']} | {fmt(r['baseline'])} {r['unit']} | "
                         f"{r['min']:.3f} / {r['median']:.3f} / {r['max']:.3f} | {goal} | {verdict} |")
        notes = [f"- {r['case']}: {r['notes']}" for r in mine if r.get("notes")]
        lines += ["", f"Repeats: {', '.join(sorted({str(r['repeats']) for r in mine}))}. Notes:", "", *notes, ""]
    return "\n".join(lines)


# Ratios past this are drawn at the edge (a triangle, the value written): a 28x case of a few
# kilobytes would otherwise squash every ratio near the goals into the first tenth of the axis.
RATIO_AXIS_MAX = 4.0


def figure(rows: list[dict], path: Path) -> None:
    """Median ratio per benchmark and case, min-max as a bar, goals as red ticks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="notebook")
    groups = [(name, [r for r in rows if r["_run"] == name]) for _, name, _ in BENCHMARKS]
    groups = [(name, rs) for name, rs in groups if rs]
    if not groups:  # every benchmark failed: still leave a figure that says so
        fig, ax = plt.subplots(figsize=(6, 1.5))
        ax.axis("off")
        ax.text(0.5, 0.5, "no results: see RESULTS.md", ha="center", va="center")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return
    heights = [len(rs) + 1.5 for _, rs in groups]
    fig, axes = plt.subplots(len(groups), 1, figsize=(11, 0.42 * sum(heights) + 1),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    colors = {True: "#2a9d4b", False: "#d1453b", None: "#7a7a7a"}
    for ax, (name, rs) in zip(axes[:, 0], groups):
        y = list(range(len(rs)))[::-1]
        for yi, r in zip(y, rs):
            color = colors[passes(r)]
            ax.plot([min(r["min"], RATIO_AXIS_MAX), min(r["max"], RATIO_AXIS_MAX)], [yi, yi], color=color, lw=5,
                    alpha=0.35, solid_capstyle="round")
            off_scale = r["median"] > RATIO_AXIS_MAX
            ax.plot(min(r["median"], RATIO_AXIS_MAX), yi, ">" if off_scale else "o", color=color, ms=8)
            ax.annotate(f"{r['median']:.2f}", (min(r["median"], RATIO_AXIS_MAX), yi), xytext=(0, 7),
                        textcoords="offset points", ha="center", fontsize=8)
            if r["goal"] is not None:
                ax.plot(r["goal"], yi, marker="|", color="#d1453b", ms=18, mew=2.5)
        ax.set_yticks(y, [r["case"] for r in rs], fontsize=9)
        ax.set_ylim(-0.7, len(rs) - 0.3)
        right = max(max(r["max"] for r in rs), max((r["goal"] or 0) for r in rs))
        ax.set_xlim(left=0, right=min(right, RATIO_AXIS_MAX) * 1.15)
        direction = {True: "higher is better", False: "lower is better"}
        directions = " / ".join(sorted({direction[r.get("higher_is_better", True)] for r in rs}))
        metrics = ", ".join(dict.fromkeys(r["metric"] for r in rs))
        ax.set_title(f"{rs[0]['benchmark']}: {metrics}, ratio to baseline ({directions})", fontsize=11, loc="left")
    axes[-1, 0].set_xlabel("ratio measured / baseline: dot median, bar min-max over repeats, red tick goal; "
                           f"green pass, red fail, grey no goal; a triangle: past {RATIO_AXIS_MAX:g}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def keep_earlier_results(path: Path, meta: dict, rows: list[dict], runs: dict) -> None:
    """With --only, the other benchmarks' rows of the last full run stay in the results, dated."""
    if not path.exists():
        return
    earlier = json.loads(path.read_text())
    ran = set(runs)
    for r in earlier["rows"]:
        if r["run"] not in ran:
            rows.append({**{k: v for k, v in r.items() if k != "run"}, "_run": r["run"]})
            runs.setdefault(r["run"], earlier.get("meta", {}).get("seconds", {}).get(r["run"], 0.0))
            meta.setdefault("kept", {})[r["run"]] = earlier.get("meta", {}).get("kept", {}).get(
                r["run"], earlier["meta"]["date"])
    meta["seconds"] = {**earlier.get("meta", {}).get("seconds", {}), **meta.get("seconds", {})}


def main() -> int:
    names = [name for _, name, _ in BENCHMARKS]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=names, metavar="NAME", help=f"some of: {', '.join(names)}")
    parser.add_argument("--quick", action="store_true", help="short smoke versions of every benchmark")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "RESULTS.md")
    args = parser.parse_args()
    meta = {"host": host(), "tiers": tiers(), "versions": versions(), "command": command(), "quick": args.quick,
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds")}
    rows, errors, runs = [], {}, {}
    load_at_start = os.getloadavg()[0]
    for number, name, module in BENCHMARKS:
        if args.only and name not in args.only:
            continue
        print(f"== ({number}) {name}", flush=True)
        t0 = time.perf_counter()
        try:
            got = importlib.import_module(module).run(args)
            rows += [{**r, "_run": name} for r in got]
            for r in got:
                print(f"   {r['case']}: {r['median']:.2f} (goal {r['goal']})", flush=True)
        except Exception:  # noqa: BLE001 - record it, run the others
            errors[name] = traceback.format_exc()
            print(errors[name], file=sys.stderr, flush=True)
        runs[name] = time.perf_counter() - t0
    meta["seconds"] = dict(runs)
    meta["load_average"] = {"start": load_at_start, "end": os.getloadavg()[0]}
    out = args.out
    if args.only:
        keep_earlier_results(out.parent / "results.json", meta, rows, runs)
    out.parent.mkdir(parents=True, exist_ok=True)
    here = str(REPO) + "/"  # paths relative to the repository: the results are committed
    out.write_text(markdown(meta, rows, errors, runs).replace(here, ""))
    (out.parent / "results.json").write_text(json.dumps(
        {"meta": meta, "rows": [{k: v for k, v in r.items() if k != "_run"} | {"run": r["_run"]} for r in rows],
         "errors": errors}, indent=1).replace(here, ""))
    figure(rows, out.parent / "results.png")
    print(f"wrote {out}, {out.parent / 'results.json'}, {out.parent / 'results.png'}")
    if not args.quick and out == REPO / "bench" / "RESULTS.md":  # a smoke run's numbers stay out of the README
        readme.update(REPO / "README.md", json.loads((out.parent / "results.json").read_text()), names)
        print(f"wrote the README's table of the latest numbers ({REPO / 'README.md'})")
    if errors:
        print(f"failed: {', '.join(errors)}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
