"""The one writer of every output file: what a path may be, and how it is written.

Every command's output (``-o``/``--out``, ``--trace``, ``--report``, ``--plot``, files inside an
export folder) goes through :func:`open_output` or :func:`write_output`; :func:`check_output`
checks a path up front, before the work that produces it, and names the option. By what is
at the path:

* a new path or a regular file (also through a symbolic link, which stays a link): written
  to a temporary file beside it and renamed into place, so the path holds the old file or the
  complete new one, never half of one; an existing file keeps its permissions;
* a character device or a FIFO (``/dev/null``, a terminal, a pipe, a shell's process
  substitution ``>(...)``): written in place, never replaced;
* ``-`` and ``/dev/stdout``: standard output; ``/dev/stderr``, ``/dev/fd/N`` and
  ``/proc/self/fd/N``: that open file descriptor, as a shell redirection would;
* an empty path, a directory, a socket or a block device: refused (:class:`OutputError`,
  exit 2), naming the option and the path.

A write that fails (a full disk, a folder without write permission) raises
:class:`OutputError` naming the path: ``cannot write PATH: No space left on device``.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from dnnpart.errors import DnnpartError

__all__ = ["STDOUT", "OutputError", "OutputTarget", "check_output", "is_stdout", "open_output",
           "write_output"]

#: The path that means standard output.
STDOUT = "-"
#: Paths that name an open file descriptor: written to it, as a shell redirection would.
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd)/(\d+)$")
_STD_PATHS = {"/dev/stdout": 1, "/dev/stderr": 2}


class OutputError(DnnpartError, OSError):
    """An output path that cannot be written; the message names the option or the path.

    An :class:`OSError` as well, for callers that catch those; the CLI exits 2.
    """


@dataclass(frozen=True, slots=True)
class OutputTarget:
    """Where an output goes and how it is written (see the module docstring).

    Attributes
    ----------
    path : the path as given (``-`` for standard output).
    how : ``"atomic"`` (temporary file and rename), ``"in-place"`` (a character device or
        FIFO), ``"fd"`` (an open file descriptor: ``fd``) or ``"stdout"``.
    real : the file written: ``path`` with symbolic links resolved (``atomic``).
    fd : the file descriptor (``how == "fd"``).
    """

    path: str
    how: Literal["atomic", "in-place", "fd", "stdout"]
    real: Path | None = None
    fd: int | None = None


def is_stdout(path: str | os.PathLike[str] | None) -> bool:
    """Whether ``path`` means standard output (``-`` or ``/dev/stdout``).

    Examples
    --------
    >>> is_stdout("-"), is_stdout("/dev/stdout"), is_stdout("plan.json"), is_stdout(None)
    (True, True, False, False)
    """
    return path is not None and os.fspath(path) in (STDOUT, "/dev/stdout")


def check_output(path: str | os.PathLike[str], *, option: str = "--out",
                 directory: bool = False) -> OutputTarget:
    """Check ``path`` as the output of ``option`` before any work: how it will be written.

    ``directory=True``: the output is a folder (created when written if missing); anything
    but a folder or a new path is refused.

    Raises
    ------
    OutputError
        An empty path, a directory (for a file), a socket, a block device, a path in a
        missing folder; for a folder, anything that is not one.

    Examples
    --------
    >>> check_output("-").how, check_output("/dev/null").how
    ('stdout', 'in-place')
    >>> check_output("", option="--trace")
    Traceback (most recent call last):
    ...
    dnnpart.io.output_files.OutputError: --trace: empty path; name a file (or - for standard output)
    >>> check_output("/", option="-o")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dnnpart.io.output_files.OutputError: -o /: is a directory; expected a file ...
    """
    text = os.fspath(path)
    if not isinstance(text, str):
        text = os.fsdecode(text)
    if not text.strip():
        what = "a folder" if directory else "a file (or - for standard output)"
        raise OutputError(f"{option}: empty path; name {what}")
    if directory:
        return _check_folder(text, option)
    if is_stdout(text):
        return OutputTarget(text, "stdout")
    match = _FD_PATH.match(text)
    if text in _STD_PATHS or match:
        return OutputTarget(text, "fd", fd=_STD_PATHS[text] if match is None else int(match.group(1)))
    p = Path(text)
    try:
        info = os.stat(p)  # follows links: a link to /dev/null is a device
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise OutputError(f"{option} {text}: cannot write ({exc.strerror})") from None
    if info is None:
        real = Path(os.path.realpath(p))
        parent = real.parent
        if not parent.is_dir():
            reason = "does not exist" if not parent.exists() else "is not a folder"
            raise OutputError(f"{option} {text}: folder {parent} {reason}")
        return OutputTarget(text, "atomic", real=real)
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return OutputTarget(text, "atomic", real=Path(os.path.realpath(p)))
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return OutputTarget(text, "in-place", real=p)
    if stat.S_ISDIR(mode):
        raise OutputError(f"{option} {text}: is a directory; expected a file "
                          "(or - for standard output)")
    kind = "a socket" if stat.S_ISSOCK(mode) else "a block device" if stat.S_ISBLK(mode) \
        else "not a regular file"
    raise OutputError(f"{option} {text}: is {kind}; dnnpart writes files, character devices "
                      "and FIFOs")


def _check_folder(text: str, option: str) -> OutputTarget:
    p = Path(text)
    if is_stdout(text) or _FD_PATH.match(text) or text in _STD_PATHS:
        raise OutputError(f"{option} {text}: this output writes a folder; name one")
    if p.is_dir():
        return OutputTarget(text, "atomic", real=p)
    if p.exists() or p.is_symlink():
        raise OutputError(f"{option} {text}: exists and is not a folder; this output writes a folder")
    parent = Path(os.path.realpath(p)).parent
    if not parent.is_dir():
        raise OutputError(f"{option} {text}: folder {parent} does not exist")
    return OutputTarget(text, "atomic", real=p)


@contextlib.contextmanager
def open_output(path: str | os.PathLike[str], *, option: str = "--out",
                binary: bool = False) -> Iterator[IO[Any]]:
    """A file object for the output ``path``, written as :func:`check_output` says.

    Text is written as UTF-8. For a new or regular file the content appears at ``path`` only
    when the block ends without an exception (and is discarded otherwise).

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with open_output(target) as fh:
    ...     _ = fh.write("ok\\n")
    >>> open(target).read()
    'ok\\n'
    """
    target = check_output(path, option=option)
    name = target.path
    if target.how == "stdout":
        stream = sys.stdout
        if binary:
            buffer = getattr(stream, "buffer", None)
            if buffer is None:
                raise OutputError(f"{option} {name}: standard output takes no binary data here")
            stream.flush()
            with _errors_named(name):
                yield buffer
                buffer.flush()
        else:
            with _errors_named(name):
                yield stream
                stream.flush()
        return
    if target.how == "fd":
        assert target.fd is not None
        for std in (sys.stdout, sys.stderr):  # what Python printed first comes first
            with contextlib.suppress(Exception):
                std.flush()
        with _errors_named(name):
            fd = os.dup(target.fd)
            with os.fdopen(fd, "wb") as raw, _wrap(raw, binary) as fh:
                yield fh
        return
    if target.how == "in-place":
        with _errors_named(name):
            fd = os.open(name, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            os.close(fd)
            raise
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):  # replaced since it was checked
            os.close(fd)
            raise OutputError(f"{option} {name}: changed while being written; run again")
        with _errors_named(name), os.fdopen(fd, "wb") as raw, _wrap(raw, binary) as fh:
            yield fh
        return
    assert target.real is not None
    with _atomic(target.real, name) as tmp, _wrap(tmp, binary) as fh:
        yield fh


def write_output(data: str | bytes, path: str | os.PathLike[str], *, option: str = "--out") -> None:
    """Write ``data`` (text as UTF-8) to the output ``path`` (see :func:`open_output`).

    Examples
    --------
    >>> write_output("nothing", "/dev/null")
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "out.json")
    >>> write_output('{"a": 1}', target)
    >>> open(target).read()
    '{"a": 1}'
    """
    with open_output(path, option=option, binary=isinstance(data, bytes)) as fh:
        fh.write(data)


@contextlib.contextmanager
def _atomic(real: Path, name: str) -> Iterator[IO[bytes]]:
    """A temporary file beside ``real``, renamed over it when the block succeeds."""
    try:
        before: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        before = None
    except OSError as exc:
        raise _named(name, exc) from None
    # a unique name made with O_EXCL cannot collide with another writer; mode 0o666 (less the
    # umask) gives a new file ordinary permissions, unlike mkstemp's 0o600
    tmp = real.with_name(f".{real.name[:200]}.{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise _named(name, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            if before is not None:
                with contextlib.suppress(OSError):  # keep the file's permissions
                    os.fchmod(fh.fileno(), stat.S_IMODE(before.st_mode))
            with _errors_named(name):
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
        with _errors_named(name):
            now = os.lstat(real) if os.path.lexists(real) else None
            if now is not None and not stat.S_ISREG(now.st_mode):
                raise OutputError(f"{name}: is no longer a regular file; not replaced")
            os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def _wrap(raw: IO[bytes], binary: bool) -> Iterator[IO[Any]]:
    """``raw`` itself (binary) or a UTF-8 text layer over it; ``raw`` stays open."""
    if binary:
        yield raw
        return
    import io

    text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    try:
        yield text
        text.flush()
    finally:
        text.detach()


@contextlib.contextmanager
def _errors_named(name: str) -> Iterator[None]:
    """An :class:`OSError` in the block becomes an :class:`OutputError` naming ``name``."""
    try:
        yield
    except OutputError:
        raise
    except OSError as exc:
        raise _named(name, exc) from None


def _named(name: str, exc: OSError) -> OutputError:
    reason = exc.strerror or str(exc) or type(exc).__name__
    return OutputError(f"cannot write {name}: {reason}")
