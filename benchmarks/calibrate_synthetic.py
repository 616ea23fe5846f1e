"""Capture the calibration graphs and write ``src/dnnpart/zoo/calibration.json``.

Run: ``PYTHONPATH=src python benchmarks/calibrate_synthetic.py`` (needs torch; a few minutes
on 2 cores). Each entry is the training graph (autograd, no optimizer) of a ``zoo:`` workload
at the size given below; :mod:`dnnpart.zoo.synthetic` draws graphs like it without torch.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from dnnpart.zoo.captured import workload_graph
from dnnpart.zoo.synthetic import CALIBRATION_FILE, calibrate

#: like-name -> the capture it is calibrated on (sizes chosen to capture in under a minute)
CALIBRATED_ON = {
    "word-rnn": "zoo:word-rnn",
    "char-crn": "zoo:char-crn",
    "wide-resnet": "zoo:wide-resnet",
    "deep-transformer": "zoo:deep-transformer:layers=12,width=768,heads=12",
}


def main() -> int:
    target = Path(__file__).resolve().parents[1] / "src" / "dnnpart" / "zoo" / CALIBRATION_FILE
    models = {}
    for like, spec in CALIBRATED_ON.items():
        start = time.perf_counter()
        graph = workload_graph(spec)
        models[like] = calibrate(graph, source=spec)
        print(f"{like}: {spec}, {graph.n_nodes} nodes, {graph.n_edges} edges, "
              f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    doc = {"format": "dnnpart.synthetic-calibration", "version": 1,
           "written_by": "benchmarks/calibrate_synthetic.py", "models": models}
    target.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
