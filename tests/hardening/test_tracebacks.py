"""Class 1 of issue 13: nothing escapes the CLI's net as a traceback.

240 seeded inputs (overflowing integers in every numeric field, deep JSON/YAML nesting,
file-system errors, .npz members that are not arrays, wrong-typed ``--set`` values) each end
in one ``error:`` line naming the field and exit 2; an internal error ends in one line and
exit 4, with the traceback only under ``--debug``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli
from corpus import tracebacks

N_CASES = 240


def test_seeded_corpus_ends_in_one_line(tmp_path: Path) -> None:
    rng = random.Random(1301)
    seen: dict[str, int] = {}
    for i in range(N_CASES):
        case = tracebacks(rng, tmp_path, i)
        code, _, err = run_cli(case.argv)
        allowed = case.code if isinstance(case.code, tuple) else (case.code,)
        assert code in allowed, f"{case.label} {case.argv}: exit {code}\n{err}"
        if code != 0:
            assert_one_error_line(code, err, must_name=case.must_name)
        seen[case.label] = seen.get(case.label, 0) + 1
    assert len(seen) >= 8, seen  # every kind of input was drawn


def test_internal_error_is_exit_4_with_traceback_only_under_debug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dnnpart.workflow import summary

    def broken(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(summary, "graph_summary", broken)
    code, _, err = run_cli(["info", "zoo:bert-3"])
    assert code == 4
    line = assert_one_error_line(code, err, must_name="internal error")
    assert "ZeroDivisionError" in line and "--debug" in line
    code, _, err = run_cli(["--debug", "info", "zoo:bert-3"])
    assert code == 4 and "Traceback" in err


def test_a_library_value_error_is_internal_not_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from dnnpart.workflow import summary

    def deep(*args: object, **kwargs: object) -> None:
        json.loads("{")  # a ValueError raised inside a library, not by dnnpart on purpose

    monkeypatch.setattr(summary, "graph_summary", deep)
    code, _, err = run_cli(["info", "zoo:bert-3"])
    assert code == 4, err


@pytest.mark.parametrize("exc", [ValueError, KeyError, IndexError])
def test_a_plain_error_from_our_own_code_is_a_bug(exc: type[Exception],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The exit code follows the exception's type, not the file that raised it: a plain
    ValueError/KeyError/IndexError raised in dnnpart (a numpy broadcast in our own line, a
    lookup) is exit 4 with one line that names it, the traceback under ``--debug``; only the
    errors raised on purpose for bad input (FormatError, UsageError...) are exit 2."""
    from dnnpart.errors import UsageError
    from dnnpart.workflow import summary

    def ours(*args: object, **kwargs: object) -> None:
        raise exc("contiguous")

    monkeypatch.setattr(summary, "graph_summary", ours)
    code, _, err = run_cli(["info", "zoo:bert-3"])
    line = assert_one_error_line(code, err, must_name="internal error")
    assert code == 4 and exc.__name__ in line and "rerun with --debug" in line
    code, _, err = run_cli(["--debug", "info", "zoo:bert-3"])
    assert code == 4 and "Traceback" in err and "rerun with --debug" not in err

    def refused(*args: object, **kwargs: object) -> None:
        raise UsageError("--set x: expected a number")

    monkeypatch.setattr(summary, "graph_summary", refused)
    code, _, err = run_cli(["info", "zoo:bert-3"])
    assert code == 2 and "internal error" not in err


def test_multi_line_messages_are_cut_to_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from dnnpart.errors import FormatError
    from dnnpart.workflow import summary

    def chatty(*args: object, **kwargs: object) -> None:
        raise FormatError("model: cannot trace\n" + "\n".join(f"  frame {i}" for i in range(26)))

    monkeypatch.setattr(summary, "graph_summary", chatty)
    code, _, err = run_cli(["info", "zoo:bert-3"])
    line = assert_one_error_line(code, err, must_name="model: cannot trace")
    assert code == 2 and "26 more lines" in line


def test_usage_errors_exit_2() -> None:
    code, _, err = run_cli(["solve"])
    assert code == 2 and "Traceback" not in err


def test_user_factories_that_fail_are_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    (tmp_path / "issue13_factories.py").write_text(
        "import sys\n"
        "def raises():\n    raise RuntimeError('no weights here')\n"
        "def needs(width):\n    return None\n"
        "def exits():\n    sys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, fragment in (("raises", "RuntimeError"), ("needs", "no arguments"), ("exits", "SystemExit")):
        code, _, err = run_cli(["import", f"module:issue13_factories:{name}", "-o", str(tmp_path / "g.json")])
        assert code == 2, err
        assert_one_error_line(code, err, must_name=fragment)
        assert not (tmp_path / "g.json").exists()
