"""Figure 8 of paper 1: grouped bars of throughput relative to the DP, one panel per group."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dnnpart._optional import require


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure8Panel:
    """One panel: workloads along x, one bar per method (``None`` = no bar)."""

    title: str
    labels: list[str]
    series: dict[str, list[float | None]]


def plot_figure8(panels: list[Figure8Panel], stem: str | Path) -> list[Path]:
    """Draw the panels side by side; write ``stem.png`` and ``stem.svg``; return both paths.

    Examples
    --------
    >>> import tempfile, os
    >>> p = Figure8Panel(title="demo", labels=["A"], series={"DP": [1.0], "X": [0.8]})
    >>> paths = plot_figure8([p], os.path.join(tempfile.mkdtemp(), "fig"))
    >>> [x.suffix for x in paths]
    ['.png', '.svg']
    """
    matplotlib = require("matplotlib", extra="viz", caller="Figure 8")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", extra="viz", caller="Figure 8")
    import numpy as np

    stem = Path(stem)
    n = max(1, len(panels))
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.8), squeeze=False)
    names = list(dict.fromkeys(name for p in panels for name in p.series))
    colours = plt.get_cmap("tab10")
    for ax, panel in zip(axes[0], panels, strict=False):
        x = np.arange(len(panel.labels))
        width = 0.8 / max(1, len(panel.series))
        for j, (name, values) in enumerate(panel.series.items()):
            heights = [np.nan if v is None else v for v in values]
            ax.bar(x + (j - (len(panel.series) - 1) / 2) * width, heights, width,
                   label=name, color=colours(names.index(name) % 10))
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_xticks(x, panel.labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(panel.title, fontsize=10)
        ax.set_ylabel("throughput relative to DP")
    handles, labels = [], []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8,
               frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    from dnnpart.io.output_files import open_output  # the one writer

    for path, fmt in zip(paths, ("png", "svg"), strict=True):
        with open_output(path, binary=True) as fh:
            fig.savefig(fh, format=fmt, **({"dpi": 110} if fmt == "png" else {}))
    plt.close(fig)
    return paths
