"""The method table: every built-in method is found by name without importing the others."""

from __future__ import annotations

import json

from dnnpart.solvers import available_methods
from dnnpart.solvers.registry import BUILT_IN
from dnnpart.testing import fresh_python, last_line


def test_table_names_the_declaring_module_of_every_built_in_method() -> None:
    for name, loader in BUILT_IN.items():
        assert name in {m.name for m in loader()}, f"{name}: its loader's module does not declare it"
    declared = {m.name for loader in set(BUILT_IN.values()) for m in loader()}
    assert declared == set(BUILT_IN)
    assert sorted(BUILT_IN) == [m.name for m in available_methods()]


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
    assert all(repr(name) in printed for name in BUILT_IN)


def test_importing_a_method_module_registers_nothing() -> None:
    code = (
        "import json\n"
        "import dnnpart.solvers.dp.methods, dnnpart.baselines.greedy\n"
        "from dnnpart.solvers import registry\n"
        "print(json.dumps(sorted(registry._METHODS)))\n"
    )
    assert json.loads(last_line(fresh_python(code))) == []


def test_declarations_copy_field_by_field_and_bad_capabilities_are_refused() -> None:
    """A declaration rebuilt from its fields is accepted (tests swap a method's function that
    way); capability fields outside the objective's variants, or exact forms of a heuristic,
    are refused when the declaration is made."""
    import pytest

    from dnnpart.solvers.method import MethodInfo

    for info in available_methods():
        assert MethodInfo(**{f: getattr(info, f) for f in info.__slots__}) == info
    base = {"name": "x", "func": solve_stub, "summary": "", "guarantee": ""}
    for bad, field in (({"training_forms": ()}, "training_forms"),
                       ({"overlap_modes": ("half-duplex",)}, "overlap_modes"),
                       ({"exact_forms": ("gpipe",)}, "exact_forms"),
                       ({"exact": True, "training_forms": ("pipedream",), "exact_forms": ("gpipe",)},
                        "exact_forms")):
        with pytest.raises(ValueError, match=f"method x: {field}"):
            MethodInfo(**base, **bad)
    assert MethodInfo(**base, exact=True).exact_forms == ("pipedream", "gpipe")
    assert MethodInfo(**base).exact_forms == ()


def solve_stub(problem: object, /, **kwargs: object) -> object:
    raise AssertionError("never called")
