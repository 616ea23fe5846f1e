"""The method catalog: every built-in method is found by name without importing the others."""

from __future__ import annotations

import json

from dnnpart.solvers import available_methods
from dnnpart.solvers.catalog import METHOD_MODULES
from dnnpart.testing import fresh_python, last_line


def test_catalog_names_the_module_of_every_built_in_method() -> None:
    built_in = {m.name: m.func.__module__ for m in available_methods()
                if m.func.__module__.startswith("dnnpart.")}
    assert built_in == METHOD_MODULES


def test_get_method_imports_only_its_module() -> None:
    code = (
        "import json, sys\n"
        "from dnnpart.solvers import get_method\n"
        "info = get_method('dpl')\n"
        "print(json.dumps([info.name, sorted(m for m in sys.modules if m.startswith(\n"
        "    ('dnnpart.baselines', 'dnnpart.solvers.ip', 'dnnpart.solvers.parmesan')))]))\n"
    )
    assert json.loads(last_line(fresh_python(code))) == ["dpl", []]


def test_unknown_method_lists_every_built_in_one() -> None:
    code = (
        "from dnnpart.solvers import get_method\n"
        "try:\n"
        "    get_method('no-such-method')\n"
        "except ValueError as exc:\n"
        "    print(exc)\n"
    )
    printed = fresh_python(code)
    assert all(repr(name) in printed for name in METHOD_MODULES)
