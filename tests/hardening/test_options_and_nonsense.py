"""Class 6 of issue 13: silent nonsense is refused; one typed option schema for all methods.

Driven by the registry: every method refuses unknown option keys and wrongly typed values
alike, its schema's defaults are its function's, and ``--set`` parses by the schema. 200
seeded inputs (sums overflowing to inf, duplicate ids in ``.npz``, ``--out ''``,
``reproduce --methods bogus``) end in one ``error:`` line instead of a nonsense result.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli
from corpus import nonsense

from dnnpart.solvers import available_methods, solve
from dnnpart.solvers.registry import Option, signature_defaults
from dnnpart.testing import chain_problem

METHODS = available_methods()
IDS = [m.name for m in METHODS]
WRONG: dict[type, list[Any]] = {
    int: ["3", 1.5, True, None, float("nan"), 2**70, [1]],
    float: ["0.1", True, float("inf"), float("nan"), [0.1], 10**400],
    bool: ["true", 1, 0.0, None, "yes"],
    str: [1, True, b"metis", ["metis"]],
}


def test_seeded_nonsense_is_refused(tmp_path: Path) -> None:
    rng = random.Random(1307)
    labels = set()
    for i in range(200):
        case = nonsense(rng, tmp_path, i)
        code, _, err = run_cli(case.argv)
        assert code == case.code, f"{case.label} {case.argv}: exit {code}\n{err}"
        assert_one_error_line(code, err, must_name=case.must_name)
        labels.add(case.label)
    assert len(labels) == 4


@pytest.mark.parametrize("info", METHODS, ids=IDS)
def test_unknown_option_is_refused(info: Any) -> None:
    problem = chain_problem([1, 2, 3], n_accelerators=2)
    for key in ("bogus", "max_ideal", "Seed", "max-ideals-"):
        with pytest.raises(ValueError, match=f"{info.name}: unknown option '{key.replace('-', '_')}'"):
            solve(problem, info.name, **{key.replace("-", "_"): 1})
        code, _, err = run_cli(["solve", "zoo:bert-3", "-m", info.name, "--set", f"{key}=1"])
        assert code == 2
        assert_one_error_line(code, err, must_name=f"unknown option '{key}'")


@pytest.mark.parametrize("info", METHODS, ids=IDS)
def test_wrong_types_are_refused(info: Any) -> None:
    problem = chain_problem([1, 2, 3], n_accelerators=2)
    for opt in info.options:
        for value in WRONG.get(opt.type, []):
            if value is None and opt.default is None:
                continue
            with pytest.raises(ValueError, match=f"option {opt.name}: expected"):
                solve(problem, info.name, **{opt.name: value})


@pytest.mark.parametrize("info", METHODS, ids=IDS)
def test_schema_defaults_are_the_functions(info: Any) -> None:
    declared = {o.name: o.default for o in info.options}
    actual = signature_defaults(info)
    assert set(actual) <= set(declared), f"undeclared options {set(actual) - set(declared)}"
    for name, default in actual.items():
        assert declared[name] == default, name
    for opt in info.options:  # every default passes its own check
        assert opt.check(opt.default, info.name) == opt.default


def test_set_parses_by_schema() -> None:
    opt = Option("max_ideals", int, 2_000_000, "cap", minimum=1)
    assert opt.parse("1e7") == 10_000_000 and isinstance(opt.parse("1e7"), int)
    assert opt.parse("5_000") == 5000
    for bad in ("1.5", "abc", "1e400", "0"):
        with pytest.raises(ValueError, match="option max_ideals"):
            opt.parse(bad)
    flag = Option("replication", bool, False, "x")
    assert flag.parse("true") is True and flag.parse("0") is False
    with pytest.raises(ValueError, match="expected true or false"):
        flag.parse("maybe")


def test_methods_lists_options() -> None:
    import json

    code, out, _ = run_cli(["methods", "--json"])
    assert code == 0
    listed = {m["name"]: m for m in json.loads(out)}
    for info in METHODS:
        assert [o["name"] for o in listed[info.name]["options"]] == [o.name for o in info.options]
        assert listed[info.name]["default_time_limit_s"] == info.default_time_limit
