"""One exception hierarchy for everything dnnpart raises on purpose.

The CLI maps these to exit codes: ``FormatError``/``InvalidGraphError``/``ValueError`` -> 2,
``InfeasibleError`` -> 1, ``MissingDependencyError`` -> 3.
"""

from __future__ import annotations


class DnnpartError(Exception):
    """Base of every exception dnnpart raises on purpose."""


class FormatError(DnnpartError, ValueError):
    """Untrusted input (a file, a CLI argument) is malformed.

    The message starts with the path of the offending field, e.g.
    ``nodes[17].fpgaLatency: expected a number >= 0, got "abc"``.
    """


class InvalidGraphError(DnnpartError, ValueError):
    """The graph is structurally invalid (a cycle, an unknown endpoint, a duplicate id)."""


class InfeasibleError(DnnpartError):
    """A plan was required but none exists or none was found."""


class MissingDependencyError(DnnpartError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


class ProblemTooLargeError(DnnpartError):
    """An exact method refuses an instance whose search space exceeds a configured limit."""
