"""The package layers of DESIGN.md ("Layers"): every import points down, imports inside
functions included; no dynamic import hides an edge.

Each unit is a first-level package or module of ``dnnpart`` (``dnnpart.solvers`` split one level
deeper, one unit per solver package); :data:`LAYERS` lists them top to bottom. A unit may import
units of lower layers, and within its own layer only those the layer lists after it (``zoo``
builds on ``frontends``; solver packages in the order given). The test reads the source with
:mod:`ast`, so an import in a function, a ``TYPE_CHECKING`` block or a doctest-free body counts
the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "dnnpart"

#: Top to bottom. Within a layer, a unit may import the units listed after it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("cli",),
    ("reproduce",),
    ("workflow",),
    ("export", "viz"),
    ("testing",),
    ("solvers", "solvers.registry", "solvers.brute_force", "solvers.ip", "solvers.block_pipeline",
     "baselines", "solvers.parmesan", "solvers.pardnn", "solvers.optcnn", "solvers.dp", "solvers.result",
     "solvers.incumbent", "solvers.method", "solvers.hybrid"),
    ("zoo", "frontends"),
    ("evaluate",),
    ("simulate",),
    ("pricing",),
    ("layerwise",),
    ("cost",),
    ("io",),
    ("scenarios",),
    ("problem", "plan", "stages"),
    ("graph", "devices"),
    ("_entry", "_jit", "_optional", "_yaml", "limits", "_arrays", "interrupt", "errors"),
)

def _unit(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    if parts[1] == "solvers" and len(parts) > 2:
        return f"solvers.{parts[2]}"
    return parts[1]


def _exists(unit: str, src: Path) -> bool:
    path = src / PACKAGE / Path(*unit.split("."))
    return path.is_dir() or path.with_suffix(".py").exists()


def _edges(src: Path = SRC) -> dict[tuple[str, str], str]:
    """``(importer unit, imported unit) -> "file:line"`` of the first such import. The root
    package's ``__init__`` (its public face, re-exporting from below) is no unit."""
    found: dict[tuple[str, str], str] = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_pkg else parts)
        me = _unit(module)
        if me is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                if node.level:
                    base = base[: len(base) - (node.level - 1)]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                targets = [name] + [f"{name}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                other = _unit(target)
                if other and other != me and _exists(other, src):
                    found.setdefault((me, other), f"{path.relative_to(src)}:{node.lineno}")
    return found


def _rank() -> dict[str, tuple[int, int]]:
    return {unit: (layer, pos) for layer, units in enumerate(LAYERS) for pos, unit in enumerate(units)}


def test_every_unit_has_a_layer() -> None:
    rank = _rank()
    units = {_unit(".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"))
             for p in (SRC / PACKAGE).rglob("*.py")}
    missing = sorted(u for u in units if u is not None and u not in rank)
    assert not missing, f"units without a layer in tests/test_layers.py: {missing}"


def test_imports_point_down() -> None:
    rank = _rank()
    wrong = []
    for (me, other), where in sorted(_edges().items()):
        if rank[other] <= rank[me]:
            wrong.append(f"{where}: {me} imports {other}, which is not below it")
    assert not wrong, "\n".join(wrong)


#: Dynamic imports of modules that are not dnnpart's, each with its reason: optional extras by
#: name, torchvision, and the user's own module of a ``module:PKG:CALLABLE`` spec.
EXTERNAL_IMPORTS = {
    ("dnnpart/_optional.py", "require"),
    ("dnnpart/frontends/sources.py", "_torchvision"),
    ("dnnpart/frontends/sources.py", "_from_callable"),
}


def _calls(tree: ast.AST, scope: str = "<module>") -> list[tuple[str, ast.Call]]:
    """Every call with the name of its innermost enclosing function."""
    out = []
    for child in ast.iter_child_nodes(tree):
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
        if isinstance(child, ast.Call):
            out.append((scope, child))
        out += _calls(child, inner)
    return out


def test_no_dynamic_import_hides_an_edge() -> None:
    hits = []
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        where = str(path.relative_to(SRC))
        for scope, node in _calls(ast.parse(path.read_text(encoding="utf-8"))):
            if ast.unparse(node.func) not in ("importlib.import_module", "import_module", "__import__"):
                continue
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                if arg.value.startswith(PACKAGE):
                    hits.append(f"{where}:{node.lineno} imports {arg.value} by name")
            elif (where, scope) not in EXTERNAL_IMPORTS:
                hits.append(f"{where}:{node.lineno} ({scope}) imports a computed module name")
    assert not hits, "dynamic imports hide edges:\n" + "\n".join(hits)


def test_the_checker_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    pkg = tmp_path / PACKAGE
    (pkg / "cli").mkdir(parents=True)
    (pkg / "solvers" / "dp").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from dnnpart.cli import main\n")
    (pkg / "cli" / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("def f():\n    from dnnpart.cli import main\n")
    (pkg / "solvers" / "__init__.py").write_text("")
    (pkg / "solvers" / "dp" / "__init__.py").write_text("")
    (pkg / "solvers" / "dp" / "kernels.py").write_text("from ... import errors\nfrom . import x\n")
    assert _edges(tmp_path) == {("errors", "cli"): "dnnpart/errors.py:2",
                                ("solvers.dp", "errors"): "dnnpart/solvers/dp/kernels.py:1"}
