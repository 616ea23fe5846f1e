"""The CLI's own layout: command modules import only the shared helpers and the library.

``cli/main.py`` builds the parser from the command modules and dispatches; the helpers
(:data:`HELPERS`) hold what commands share (arguments, exit codes and JSON, rendering,
progress). A command module that imported another would make commands depend on each other
again; a helper that imported a command would make the helpers depend on the commands. The
test reads the source with :mod:`ast`, so imports inside functions count.
"""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "src" / "dnnpart" / "cli"
#: Modules every command may import; they import no command.
#: parallel_plans: the --parallel path of plan (its arguments, its tables)
HELPERS = frozenset({"__init__", "args", "output", "render", "progress", "parallel_plans"})
#: The module that lists the commands and dispatches to them.
DISPATCH = "main"


def _modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted(CLI.glob("*.py"))}


def _commands() -> set[str]:
    return set(_modules()) - HELPERS - {DISPATCH}


def _cli_imports(path: Path) -> set[str]:
    """Names of the ``dnnpart.cli`` modules ``path`` imports (relative imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "dnnpart.cli" if node.level == 1 else (node.module or "")
            if node.level == 1 and node.module:
                base = f"dnnpart.cli.{node.module}"
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["dnnpart", "cli"] and len(parts) > 2:
                found.add(parts[2])
    return found & set(_modules())


def test_command_modules_import_no_other_command() -> None:
    wrong = [f"cli/{name}.py imports cli/{other}.py"
             for name in sorted(_commands())
             for other in sorted(_cli_imports(_modules()[name]) - HELPERS)]
    assert not wrong, "command modules may import only " + ", ".join(sorted(HELPERS)) + ":\n" \
        + "\n".join(wrong)


def test_helpers_import_no_command() -> None:
    wrong = [f"cli/{name}.py imports cli/{other}.py"
             for name in sorted(HELPERS & set(_modules()))
             for other in sorted(_cli_imports(_modules()[name]) - HELPERS)]
    assert not wrong, "helpers import no command module:\n" + "\n".join(wrong)


def test_main_registers_every_command_module() -> None:
    from dnnpart.cli.main import COMMANDS

    listed = {m.__name__.rpartition(".")[2] for m in COMMANDS}
    assert listed == _commands()
    for name in sorted(_commands()):
        text = _modules()[name].read_text(encoding="utf-8")
        assert "def add_parser(" in text and "set_defaults(handler=" in text, name


def test_every_command_has_a_handler() -> None:
    from dnnpart.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert sub is not None
    for name, parser in sub.items():
        assert callable(parser.get_default("handler")), name


def test_the_checker_sees_command_imports_inside_functions(tmp_path: Path) -> None:
    path = tmp_path / "x_cmd.py"
    path.write_text("from dnnpart.cli.output import dumps\n"
                    "def f():\n    from dnnpart.cli import plan_cmd\n"
                    "    from . import render\n")
    assert _cli_imports(path) == {"output", "plan_cmd", "render"}
