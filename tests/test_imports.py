"""The packages import one way (issue 28): no module of harness, plugins, ios_core or the Hydra
plugin shell imports, at module level or inside a function, a module that imports it back."""

import ast
import graphlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "plugins", "ios_core", "hydra_plugins")
ALIASES = {"harness_plugins": "plugins"}  # the installed name of plugins/


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _package(module: str, path: Path) -> list[str]:
    return module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]


def _sources(node: ast.AST, package: list[str]) -> list[str]:
    """The absolute modules an import statement imports from (none for another node)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if not node.level:
        return [node.module or ""]
    return [".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))]


def _imported(module: str, path: Path) -> set[str]:
    """Every name ``module`` imports anywhere in its text, absolute, as dotted candidates."""
    names = set()
    package = _package(module, path)
    for node in ast.walk(ast.parse(path.read_text())):
        for base in _sources(node, package):
            names.add(base)
            if isinstance(node, ast.ImportFrom):
                names.update(f"{base}.{a.name}" for a in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    mods = _modules()

    def resolve(name: str) -> str | None:
        head, _, rest = name.partition(".")
        name = ".".join(x for x in (ALIASES.get(head, head), rest) if x)
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for mod, path in mods.items():
        targets = {resolve(n) for n in _imported(mod, path)}
        # a module's own package (its __init__) is loaded first anyway: not an edge back
        graph[mod] = {t for t in targets if t and t != mod and not mod.startswith(t + ".")}
    return graph


def test_the_walker_sees_imports_inside_functions_too():
    graph = import_graph()
    assert "ios_core.runtime.target" in graph["harness.measure.profiling"]  # imported inside profile_ops (torch)
    assert "ios_core.onnx" in graph["harness.models.model"]  # imported inside _make_onnx (onnx)


def test_no_import_cycles():
    try:
        tuple(graphlib.TopologicalSorter(import_graph()).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' -> '.join(exc.args[1])}")


def test_harness_subpackages_import_one_way():
    """harness/'s subpackages (measure, machine, records, multirun, report) and top-level modules are
    layers: none imports one that imports it back (docs/DESIGN.md draws them)."""
    def unit(mod: str) -> str:
        return ".".join(mod.split(".")[:2])

    layers: dict[str, set[str]] = {}
    for mod, targets in import_graph().items():
        if mod.startswith("harness.") and mod != "harness":
            layers.setdefault(unit(mod), set()).update(
                unit(t) for t in targets if t.startswith("harness.") and unit(t) != unit(mod))
    assert {"harness.measure", "harness.machine", "harness.records", "harness.multirun"} <= set(layers)
    try:
        tuple(graphlib.TopologicalSorter(layers).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"harness subpackages import each other: {' -> '.join(exc.args[1])}")


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def test_no_plugin_name_or_option_in_the_harness():
    """The harness knows backends only through the plugin contract: no backend's name and no
    option of one backend's config (``backend.schedule``) appears as a string in harness/ code
    (docstrings and comments may mention them)."""
    from dataclasses import fields

    from harness.config import BackendConfig
    from harness.plugins import aliases, backends

    names = {*backends(), *aliases()}
    common = {f.name for f in fields(BackendConfig)}
    options = {f.name for cls in backends().values() for f in fields(cls.config_class)} - common
    found = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        tree = ast.parse(path.read_text())
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                text = node.value
                hits = {w for w in re.findall(r"[A-Za-z_]+", text) if w in names and text.strip() == w}
                hits |= {f"backend.{o}" for o in re.findall(r"backend\.(\w+)", text) if o in options}
                found += [f"{path.relative_to(REPO)}:{node.lineno}: {h!r}" for h in sorted(hits)]
    assert not found, "plugin names or options in harness/:\n" + "\n".join(found)


def test_no_function_over_sixty_lines():
    """Issue 28's limit outside tests: a longer function is split where its steps have names."""
    long = []
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})")
    assert not long, "functions over 60 lines: " + ", ".join(long)


#: project modules that load a heavy or optional library at import (torch, onnx, JAX, TensorFlow):
#: the only ones a function may import late, so that `python -m harness --help`, a one-line error or
#: a CPU-only backend does not pay for them
HEAVY = ("ios_core.runtime", "ios_core.planner", "ios_core.onnx", "ios_core.interpreters.jax",
         "ios_core.interpreters.tensorflow", "ios_core.interpreters.torch")


def test_project_imports_inside_functions_only_for_heavy_modules():
    late = []
    for mod, path in _modules().items():
        package = _package(mod, path)
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                for base in _sources(node, package):
                    if base.split(".")[0] in (*PACKAGES, *ALIASES) and not base.startswith(HEAVY):
                        late.append(f"{path.relative_to(REPO)}:{node.lineno} {fn.name}: {base}")
    assert not late, "project modules imported inside functions (move them to the top):\n" + "\n".join(late)
