"""Running the CLI in-process and checking the one-line-error promise (issue 13)."""

from __future__ import annotations

import contextlib
import io

from dnnpart.cli.main import main


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``dnnpart ARGV`` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["-q", *argv])
    return code, out.getvalue(), err.getvalue()


def assert_one_error_line(code: int, err: str, *, must_name: str = "") -> str:
    """A failed run printed exactly one ``error:`` line (naming ``must_name``), no traceback."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"exit {code}, {len(lines)} lines on stderr:\n{err}"
    assert lines[0].startswith("error: "), lines[0]
    if must_name:
        assert must_name in lines[0], f"{must_name!r} not named in {lines[0]!r}"
    return lines[0]
