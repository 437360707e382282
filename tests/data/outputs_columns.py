"""Write tests/data/outputs-columns.json: the columns of every table a smoke study wrote (but bench/'s points), from
its results folder, e.g. results/smoke after `make study STUDY=config/studies/smoke.yaml`, or the one test_workflow's
failure names. test_outputs_doc compares docs/outputs.md with the file; test_workflow checks that the smoke study's
real tables still equal it.

    python tests/data/outputs_columns.py RESULTS_FOLDER
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import OUTPUTS_COLUMNS, written_columns  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a smoke study's results folder (results/smoke)")
    results = parser.parse_args().results
    if not (results / "tables").is_dir():
        parser.error(f"{results} has no tables/ folder: not a study's results")
    snapshot = {"written_by": "tests/data/outputs_columns.py from a smoke study's results",
                "tables": written_columns(results)}
    temporary = OUTPUTS_COLUMNS.with_name(OUTPUTS_COLUMNS.name + ".tmp")
    temporary.write_text(json.dumps(snapshot, indent=1) + "\n")
    temporary.replace(OUTPUTS_COLUMNS)
    print(f"{OUTPUTS_COLUMNS}: {len(snapshot['tables'])} tables")


if __name__ == "__main__":
    main()
