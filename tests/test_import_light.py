"""``import dnnpart`` stays light: no heavy or optional dependency is imported eagerly."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("numba", "ortools", "highspy", "torch", "onnx", "matplotlib", "rich", "networkx")


def test_import_dnnpart_does_not_import_heavy_modules() -> None:
    code = (
        "import json, sys\n"
        "import dnnpart\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == [], f"import dnnpart pulled in {loaded}"
