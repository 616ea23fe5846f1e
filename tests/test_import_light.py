"""``import dnnpart`` stays light: no heavy or optional dependency is imported eagerly."""

from __future__ import annotations

import json

import pytest
from tests.workloads import ABSENT_REASON, WORKLOADS_DIR, workloads_present

from dnnpart.testing import fresh_python, last_line

HEAVY = ("numba", "ortools", "highspy", "torch", "onnx", "matplotlib", "rich", "networkx")


def test_import_dnnpart_does_not_import_heavy_modules() -> None:
    code = (
        "import json, sys\n"
        "import dnnpart\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    loaded = json.loads(last_line(fresh_python(code)))
    assert loaded == [], f"import dnnpart pulled in {loaded}"


OP_BERT3 = WORKLOADS_DIR / "throughput" / "OperatorGraphs" / "bert_l-3_inference.json"


@pytest.mark.parametrize("graph", ["zoo:bert-3", pytest.param("op-bert-3", marks=pytest.mark.skipif(
    not workloads_present(), reason=ABSENT_REASON))])
def test_small_dp_solve_loads_neither_numba_nor_scipy_sparse(graph: str) -> None:
    # start-up (issue 20): a small DP solve from the command line pays for neither numba (its
    # lattice and rows run in numpy) nor scipy.sparse (the stage graph's components come from
    # a plain twin), nor numpy.ma (np.unique imports it: ~10 ms), nor the other methods' modules
    if graph == "op-bert-3":
        graph = str(OP_BERT3)
    code = (
        "import contextlib, io, json, sys\n"
        "from dnnpart.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    rc = main(['solve', {graph!r}, '--method', 'dp'])\n"
        "heavy = ('numba', 'scipy.sparse', 'scipy.optimize', 'numpy.ma', 'dnnpart.baselines',\n"
        "         'dnnpart.solvers.ip')\n"
        "print(json.dumps([rc, sorted(m for m in sys.modules\n"
        "                             if any(m == h or m.startswith(h + '.') for h in heavy))]))\n"
    )
    rc, loaded = json.loads(last_line(fresh_python(code, timeout=300)))
    assert rc == 0
    assert loaded == []
