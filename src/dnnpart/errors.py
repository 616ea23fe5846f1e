"""One exception hierarchy for everything dnnpart raises on purpose.

The CLI maps these to exit codes: ``FormatError``/``UsageError``/``InvalidGraphError``/
``UnknownIdError`` -> 2,
``InfeasibleError``/``ProblemTooLargeError`` -> 1, ``MissingDependencyError`` -> 3. Anything
else that escapes (a plain ``ValueError``, ``KeyError``, ``IndexError`` included, wherever it
was raised) is a bug: exit 4. So input is checked at the edge, by raising one of these.
"""

from __future__ import annotations


class DnnpartError(Exception):
    """Base of every exception dnnpart raises on purpose."""


class FormatError(DnnpartError, ValueError):
    """Untrusted input (a file, a CLI argument) is malformed.

    The message starts with the path of the offending field, e.g.
    ``nodes[17].fpgaLatency: expected a number >= 0, got "abc"``.
    """


class UsageError(DnnpartError, ValueError):
    """An option, argument or combination of them the user gave is not valid here.

    The message names the option, e.g. ``method 'dp': option threads: expected >= 1, got 0``.
    """


class InvalidGraphError(DnnpartError, ValueError):
    """The graph is structurally invalid (a cycle, an unknown endpoint, a duplicate id)."""


class UnknownIdError(DnnpartError, KeyError):
    """The input names a node id, device or other entity that does not exist.

    A ``KeyError`` for callers that look names up; its message is the text as given (not the
    quoted ``repr`` a plain ``KeyError`` prints).
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class InfeasibleError(DnnpartError):
    """A plan was required but none exists or none was found."""


class MissingDependencyError(DnnpartError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""


class ProblemTooLargeError(DnnpartError):
    """An exact method refuses an instance whose search space exceeds a configured limit."""
