"""A cluster's routed bandwidth as a heat map (``dnnpart cluster show SPEC --plot OUT.png``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dnnpart.devices.cluster import Cluster


def plot_bandwidth(cluster: Cluster, path: str | Path) -> None:
    """Draw the device-to-device bandwidth (GB/s, diagonal blank) into the image ``path``.

    Raises
    ------
    MissingDependencyError
        matplotlib is not installed (extra ``viz``).
    """
    from dnnpart.errors import MissingDependencyError

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("--plot needs matplotlib (pip install 'dnnpart[viz]')") from None
    bw = cluster.bandwidth.copy()
    np.fill_diagonal(bw, np.nan)
    with matplotlib.rc_context({"text.parse_math": False}):  # the cluster's name is text, not mathtext
        fig, ax = plt.subplots(figsize=(6, 5))
        im = ax.imshow(bw / 1e9, cmap="viridis")
        fig.colorbar(im, ax=ax, label="routed bandwidth (GB/s)")
        ax.set_title(f"{cluster.name}: widest-path bandwidth")
        ax.set_xlabel("device")
        ax.set_ylabel("device")
        fig.tight_layout()
    from dnnpart.io.output_files import open_output

    # the one writer (a device or FIFO in place); the format from the suffix, else PNG
    suffix = Path(path).suffix.lower().lstrip(".")
    with open_output(path, option="--plot", binary=True) as fh:
        fig.savefig(fh, dpi=100, format=suffix if suffix in fig.canvas.get_supported_filetypes() else "png")
    plt.close(fig)
