"""Saving a figure: every format asked for (by each path's suffix: .png, .svg), each landed safely."""

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
