#!/usr/bin/env python3
"""A stand-in for ``ior`` and ``mdtest`` that REPLAYS REAL RECORDED OUTPUTS; it measures nothing.

IOR is in no package registry, so CI has none. Called as ``ior`` or ``mdtest`` (a link of that name to this
file), it finds the real IOR 4.0.0 / mdtest run recorded beside it (``NAME.meta.json``: its exact argv and
tier) whose command it was given, and prints that run's stdout (in tests/data/ior, the runs' outputs); for IOR
it also writes the run's JSON summary to the ``summaryFile`` it is told. With no recorded run for its command
it fails as IOR would, naming it.

Which recording: IOR's options must equal the recorded ones but for the paths (``-o``, ``summaryFile``), so a
command line that drifts from IOR's real one finds no recording. mdtest's recorded runs had other options than
cycleio's (``-i 2``, no ``-F -P -N 1``): there the file count ``-n`` must match. The tier is the recorded
run's ``tier`` ("disk", "shm") as a folder name in the test path (``-o`` or ``-d``).
"""

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUTPUTS = HERE.parent / "ior"


def _options(argv: list[str], tool: str) -> tuple[list[str], str, str | None]:
    """The options without paths, the test path, and the summary file."""
    options, target, summary, skip = [], "", None, False
    for index, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        if arg in ("-o", "-d") and index + 1 < len(argv):
            target, skip = argv[index + 1], True
        elif arg.startswith("summaryFile="):
            summary = arg.split("=", 1)[1]
            options.pop()  # its "-O"
        elif arg.startswith("--saveRankPerformanceDetails="):
            continue
        else:
            options.append(arg)
    if tool == "mdtest":
        options = options[options.index("-n"):options.index("-n") + 2] if "-n" in options else options
    return options, target, summary


def main(tool: str, argv: list[str]) -> int:
    options, target, summary = _options(argv, tool)
    folders = Path(target).parts
    for meta_path in sorted(HERE.glob("*.meta.json")):
        meta = json.loads(meta_path.read_text())
        recorded = meta["argv"][meta["argv"].index(meta["tool"]) + 1:] if meta["tool"] in meta["argv"] else []
        if meta["tool"] != tool or meta["exit_code"] != 0 or meta["tier"] not in folders:
            continue
        if _options(recorded, tool)[0] != options:
            continue
        files = meta["files"]
        print((OUTPUTS / files["stdout"]).read_text(), end="")
        if summary and files.get("json_summary"):
            shutil.copy(OUTPUTS / files["json_summary"], summary)
        return 0
    print(f"ERROR: no recorded real {tool} run has this command line: {' '.join(argv)}")
    return 255


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[0]).name, sys.argv[1:]))
