"""cycleio compare on two small studies (hand-made step_summary tables): the expected differences and verdicts."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from conftest import assert_png_drawn, step_summary

from cycleio.cli import main
from cycleio.report.compare import compare_lines, compare_tables


def studies(tmp_path):
    a = step_summary()
    b = a.assign(study="fy")
    b.loc[(b["arm"] == "lustre") & (b["step"] == "fcst"), "wall_s"] += 1  # +1 s per cycle: inside the noise
    b.loc[(b["arm"] == "node_local") & (b["step"] == "fcst"), "wall_s"] -= 2  # -2 s per cycle: a real change
    b = b[b["arm"] != "shm"]  # an arm B dropped
    folders = []
    for name, table in (("fx", a), ("fy", b)):
        (tmp_path / name / "tables").mkdir(parents=True)
        table.to_csv(tmp_path / name / "tables" / "step_summary.csv", index=False)
        folders.append(tmp_path / name)
    return folders


def test_compare_two_studies(tmp_path, capsys):
    a, b = studies(tmp_path)
    out = tmp_path / "compare.csv"
    assert main(["compare", str(a), str(b), "--out-csv", str(out), "--png", str(tmp_path / "c.png"),
                 "--svg", str(tmp_path / "c.svg")]) == 0
    table = pd.read_csv(out).set_index(["arm", "step", "activity"])
    lustre = table.loc[("lustre", "cycle", "wall_s")]
    # cycles 8 and 9 s in A, 9 and 10 in B: +1 s, standard error sqrt(0.5/2 + 0.5/2)
    # node_local: 8.5 and 8 s in A, 6.5 and 6 in B: -2 s, standard error sqrt(0.125/2 + 0.125/2)
    assert (lustre["a_mean_s"], lustre["b_mean_s"], lustre["diff_s"]) == (8.5, 9.5, 1.0)
    assert lustre["diff_se_s"] == pytest.approx(math.sqrt(0.5)) and lustre["verdict"] == "within noise"
    local = table.loc[("node_local", "cycle", "wall_s")]
    assert local["diff_s"] == -2 and local["diff_se_s"] == pytest.approx(math.sqrt(0.125))
    assert local["verdict"] == "B faster"
    assert local["change_percent"] == pytest.approx(-200 / 8.25)
    fcst = table.loc[("node_local", "fcst", "wall_s")]
    assert fcst["a_mean_s"] == pytest.approx((3 + 4.5 + 4) / 3)  # the half cycle's forecast too
    assert (fcst["diff_s"], fcst["verdict"]) == (-2, "B faster")
    io = table.loc[("lustre", "fcst", "io_s")]  # 2 s in every cycle of both: no change
    assert (io["diff_s"], io["diff_se_s"], io["verdict"]) == (0, 0, "within noise")
    assert "shm" not in table.index.get_level_values("arm")
    printed = capsys.readouterr().out
    assert "node_local: a cycle took 8.25 s in fx and 6.25 s in fy: -2.00 ± 0.35 s (-24%), B faster" in printed
    # then the jobs that changed: a forecast 1 s slower is beyond its own noise (three forecasts, the half cycle's
    # too) while the cycle's sum is not
    assert "  jobs whose wall time changed beyond noise: fcst 3.83 -> 1.83 s (-2.00 ± 0.62 s, -52%)\n" in printed
    assert "lustre: a cycle took 8.50 s in fx and 9.50 s in fy: +1.00 ± 0.71 s (+12%), within noise\n" \
           "  jobs whose wall time changed beyond noise: fcst 4.33 -> 5.33 s (+1.00 ± 0.47 s, +23%)\n" in printed
    same = compare_lines(compare_tables(step_summary(), step_summary()))
    assert same[1] == "  no job's wall time changed beyond noise"
    assert "arms only in study A: shm" in printed
    assert_png_drawn(tmp_path / "c.png", None)
    assert (tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")
