"""Saving a figure: every format asked for (by each path's suffix: .png, .svg), each landed safely; and the
panel a figure shows where it has nothing to plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..fsutil import landing  # noqa: E402

DPI = 120


def save_figure(fig, paths) -> None:
    """Write ``fig`` to each path (temporary name, fsync, rename), then close it."""
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        path = Path(path)
        with landing(path) as tmp:
            fig.savefig(tmp, dpi=DPI, format=path.suffix.lstrip("."))
    plt.close(fig)


def empty_panel(ax, text: str) -> None:
    """A panel with nothing to plot: ``text`` in grey, centred, no ticks."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")
    ax.set_xticks([])
    ax.set_yticks([])
