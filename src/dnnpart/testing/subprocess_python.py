"""Run a snippet in a fresh interpreter (what a new process imports, prints and loads)."""

from __future__ import annotations

import subprocess
import sys


def fresh_python(code: str, *, timeout: float = 120) -> str:
    """Standard output of ``python -c code`` in a fresh interpreter; fails with its stderr.

    Examples
    --------
    >>> fresh_python("print(6 * 7)")
    '42\\n'
    """
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def last_line(output: str) -> str:
    """The last line of ``output`` (snippets print their result last)."""
    return output.strip().splitlines()[-1]
