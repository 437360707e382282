"""The answer commands of the CLI (cli.answers): each draws or writes from the tables the rules hand it."""

from __future__ import annotations

from conftest import io_gap_fixture


def test_io_gap_command_draws_from_the_table(tmp_path):
    from cycleio.cli import main

    io_gap_fixture().to_csv(tmp_path / "io_gap.csv", index=False)
    assert main(["io-gap-figure", "--io-gap", str(tmp_path / "io_gap.csv"), "--png", str(tmp_path / "g.png"),
                 "--svg", str(tmp_path / "g.svg"), "--title", "fx"]) == 0
    assert (tmp_path / "g.png").stat().st_size > 0 and (tmp_path / "g.svg").stat().st_size > 0


# ------------------------------------------------------------------------------------------------ captions
