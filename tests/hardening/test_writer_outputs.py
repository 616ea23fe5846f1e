"""Issue 30, item 2: one output writer for every command that writes.

For every output option of the CLI (found by walking the parser, so a new command's output
joins or fails here until listed in :data:`WRITERS`): a character device made in a temporary
folder (``mknod``, the numbers of ``/dev/null``; never a system device) stays a device after
the command wrote to it; a FIFO is written in place (read by a thread); a directory is refused
with exit 2 and one ``error:`` line naming the option. Outputs that are folders refuse a
device, a FIFO and a regular file, and leave them as they were. Then the writer's own
promises: ``-`` is standard output, an empty path is refused naming the option, a failed
write names the path, a regular file is replaced atomically keeping its permissions, a
symbolic link stays a link, and a socket is refused.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from clirun import assert_one_error_line, run_cli

from dnnpart.cli.main import build_parser
from dnnpart.io.output_files import OutputError, check_output, write_output

#: Argument names (dests) of output options; an option whose help says it writes joins too.
OUTPUT_DESTS = {"out", "trace", "report", "plot"}

TINY_MODULE = """
import torch

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))

def build():
    return Tiny()
"""


@dataclass(frozen=True)
class Inputs:
    """Files the commands read: a ``solve -o`` plan and a ``plan -o`` plan of a tiny module."""

    solve_plan: Path
    model_plan: Path


@dataclass(frozen=True)
class Writer:
    """One output: its command, option, whether it is a folder, and argv for a target."""

    command: str
    option: str
    argv: Callable[[Inputs, str], list[str]]
    folder: bool = False
    slow: bool = False


def _tiny() -> list[str]:
    return ["module:dnnpart_issue30_tiny:build", "--input-shape", "2,4"]


#: Every output option: (command, dest) as the parser names them, with a variant for export's
#: file and folder formats.
WRITERS: dict[tuple[str, str, str], Writer] = {
    ("solve", "out", ""): Writer("solve", "--out", lambda i, t: ["solve", "zoo:bert-3", "-o", t]),
    ("plan", "out", ""): Writer("plan", "--out", lambda i, t: [
        "plan", "builtin:lenet5", "--objective", "iteration", "--cluster", "4xP100", "-o", t]),
    ("plan", "report", ""): Writer("plan", "--report", lambda i, t: [
        "plan", "builtin:lenet5", "--objective", "iteration", "--cluster", "4xP100", "--report", t]),
    ("report", "out", ""): Writer("report", "--out", lambda i, t: ["report", str(i.solve_plan), "-o", t]),
    ("simulate", "trace", ""): Writer("simulate", "--trace", lambda i, t: [
        "simulate", str(i.solve_plan), "--trace", t]),
    ("export", "out", "placement-text"): Writer("export", "--out", lambda i, t: [
        "export", str(i.solve_plan), "--format", "placement-text", "-o", t]),
    ("export", "out", "placement"): Writer("export", "--out", lambda i, t: [
        "export", str(i.model_plan), "--trust-plan", "--format", "placement", "-o", t]),
    ("export", "out", "pipelining"): Writer("export", "--out", lambda i, t: [
        "export", str(i.model_plan), "--trust-plan", "--format", "pipelining", "-o", t], folder=True),
    ("export", "out", "torch"): Writer("export", "--out", lambda i, t: [
        "export", str(i.model_plan), "--trust-plan", "--format", "torch", "-o", t], folder=True),
    ("import", "out", ""): Writer("import", "--out", lambda i, t: ["import", *_tiny(), "-o", t]),
    ("cluster show", "plot", ""): Writer("cluster show", "--plot", lambda i, t: [
        "cluster", "show", "2xA100", "--plot", t]),
    ("calibrate", "out", ""): Writer("calibrate", "--out", lambda i, t: ["calibrate", "--quick", "-o", t],
                                     slow=True),
    ("reproduce", "out", ""): Writer("reproduce", "--out", lambda i, t: [
        "reproduce", "optcnn2018", "--quick", "--out", t], folder=True),
}


def _subparsers(parser: argparse.ArgumentParser,
                prefix: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix} {name}".strip()
                yield full, sub
                yield from _subparsers(sub, full)


def parser_outputs() -> set[tuple[str, str]]:
    """(command, dest) of every option that names an output, from the CLI's parser."""
    found = set()
    for name, sub in _subparsers(build_parser()):
        for action in sub._actions:
            writes = "write" in (action.help or "").lower() and action.option_strings
            if action.dest in OUTPUT_DESTS or writes:
                if action.dest in ("quiet", "progress", "json"):
                    continue
                found.add((name, action.dest))
    return found


def test_every_output_option_of_the_parser_is_covered() -> None:
    listed = {(command, dest) for command, dest, _ in WRITERS}
    missing = parser_outputs() - listed
    assert not missing, f"output options without a writer test (add them to WRITERS): {missing}"
    assert listed <= parser_outputs() | {("cluster show", "plot")}, listed - parser_outputs()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inputs]:
    folder = tmp_path_factory.mktemp("writer-inputs")
    (folder / "dnnpart_issue30_tiny.py").write_text(TINY_MODULE)
    sys.path.insert(0, str(folder))
    from dnnpart.solvers import solve
    from dnnpart.workflow import load_problem, write_solved_plan

    problem = load_problem("zoo:bert-3")
    solve_plan = folder / "solve.json"
    write_solved_plan(problem, solve(problem, "dp"), solve_plan, "zoo:bert-3")
    model_plan = folder / "model.json"
    code, _, err = run_cli(["plan", *_tiny(), "--cluster", "2xA100", "-o", str(model_plan)])
    assert code == 0, err
    try:
        yield Inputs(solve_plan, model_plan)
    finally:
        sys.path.remove(str(folder))


def _mknod_null(path: Path) -> None:
    """A character device with /dev/null's numbers, in our own folder (skip where not allowed)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod of a character device needs root (CAP_MKNOD); not root here")


def _cases(*, folder: bool) -> list[pytest.param]:
    return [pytest.param(key, id="-".join(k for k in key if k).replace(" ", "-"),
                         marks=[pytest.mark.slow] if w.slow else [])
            for key, w in WRITERS.items() if w.folder == folder]


class FifoReader:
    """Reads a FIFO in a thread until its writer closes it (or :meth:`finish` ends it)."""

    def __init__(self, path: Path) -> None:
        self.path, self.data = path, b""
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.path, "rb") as fh:
            self.data = fh.read()

    def finish(self) -> bytes:
        """The bytes read; a FIFO nobody opened is opened and closed here, so the reader ends."""
        deadline = time.monotonic() + 10
        while self.thread.is_alive() and time.monotonic() < deadline:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # the reader has not opened it yet
                time.sleep(0.01)
                continue
            os.close(fd)
            self.thread.join(1)
        assert not self.thread.is_alive()
        return self.data


@pytest.mark.parametrize("key", _cases(folder=False))
def test_file_outputs_keep_devices_and_fifos_and_refuse_folders(key: tuple[str, str, str], inputs: Inputs,
                                                                tmp_path: Path) -> None:
    writer = WRITERS[key]
    device = tmp_path / "null-device"
    _mknod_null(device)
    code, _, err = run_cli(writer.argv(inputs, str(device)))
    assert code == 0, err
    assert stat.S_ISCHR(os.stat(device).st_mode), f"{writer.command} {writer.option} replaced the device"
    assert os.stat(device).st_rdev == os.makedev(1, 3)

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    code, _, err = run_cli(writer.argv(inputs, str(fifo)))
    data = reader.finish()
    assert code == 0, err
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), f"{writer.command} {writer.option} replaced the FIFO"
    assert data, f"{writer.command} {writer.option} wrote nothing into the FIFO"

    folder = tmp_path / "a-folder"
    folder.mkdir()
    code, _, err = run_cli(writer.argv(inputs, str(folder)))
    assert code == 2
    assert_one_error_line(code, err, must_name=writer.option)
    assert folder.is_dir() and not any(folder.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-folder", "fifo", "null-device"]  # no temp left


@pytest.mark.parametrize("key", _cases(folder=True))
def test_folder_outputs_refuse_devices_fifos_and_files(key: tuple[str, str, str], inputs: Inputs,
                                                       tmp_path: Path) -> None:
    writer = WRITERS[key]
    device = tmp_path / "null-device"
    _mknod_null(device)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    regular = tmp_path / "file.txt"
    regular.write_text("keep me")
    for target in (device, fifo, regular):
        reader = FifoReader(fifo) if target == fifo else None
        code, _, err = run_cli(writer.argv(inputs, str(target)))
        data = reader.finish() if reader is not None else b""
        assert code == 2, (target, err)
        assert_one_error_line(code, err, must_name=writer.option)
        assert data == b""
    assert stat.S_ISCHR(os.stat(device).st_mode) and stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert regular.read_text() == "keep me"


def test_dash_is_standard_output_and_the_summary_moves_to_stderr(tmp_path: Path) -> None:
    code, out, err = run_cli(["solve", "zoo:bert-3", "-o", "-"])
    assert code == 0, err
    assert json.loads(out)["format"] == "dnnpart.plan"  # stdout holds the plan and nothing else
    code, out, err = run_cli(["solve", "zoo:bert-3", "-o", "-", "--json"])
    assert code == 2 and out == ""
    assert_one_error_line(code, err, must_name="--json")


@pytest.mark.parametrize("argv,option", [
    (["report", "{plan}", "-o", ""], "--out"),
    (["simulate", "{plan}", "--trace", ""], "--trace"),
    (["solve", "zoo:bert-3", "-o", ""], "--out"),
    (["export", "{plan}", "--format", "placement-text", "-o", ""], "--out"),
])
def test_empty_paths_are_refused_naming_the_option(argv: list[str], option: str, inputs: Inputs) -> None:
    code, _, err = run_cli([a.replace("{plan}", str(inputs.solve_plan)) for a in argv])
    assert code == 2
    line = assert_one_error_line(code, err, must_name=option)
    assert "empty path" in line


def test_a_failed_write_names_the_path(tmp_path: Path) -> None:
    full = tmp_path / "full-device"
    try:
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's numbers: ENOSPC
    except PermissionError:
        pytest.skip("mknod of a character device needs root (CAP_MKNOD); not root here")
    code, _, err = run_cli(["solve", "zoo:bert-3", "-o", str(full)])
    assert code == 2
    line = assert_one_error_line(code, err)
    assert f"cannot write {full}: No space left on device" in line
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_regular_files_are_replaced_atomically_keeping_mode_and_links(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_output("new", link)
    assert link.is_symlink() and target.read_text() == "new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640

    class Boom(Exception):
        pass

    from dnnpart.io.output_files import open_output

    with pytest.raises(Boom), open_output(target) as fh:
        fh.write("half of a new fi")
        raise Boom
    assert target.read_text() == "new"  # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "out.json"]


def test_sockets_block_devices_and_missing_folders_are_refused(tmp_path: Path) -> None:
    sock_path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(OutputError, match=r"--trace .*is a socket"):
            check_output(sock_path, option="--trace")
    with pytest.raises(OutputError, match="does not exist"):
        check_output(tmp_path / "nowhere" / "x.json")
    with pytest.raises(OutputError, match="is a directory"):
        check_output(tmp_path)
    with pytest.raises(OutputError, match="not a folder"):
        check_output(tmp_path / "s", option="--out", directory=True)
