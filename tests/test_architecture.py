"""The shape of the code (docs/architecture.md): the core's layers and no import cycle anywhere
(import-linter's contracts in pyproject.toml, and every module-level cycle found here), no core
module over 400 lines, function-level imports only with their reason, and start-up that imports
only what is used."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "harness"
PLUGIN_PACKAGES = sorted(p.name for p in REPO.glob("plugins/*/harness_*") if (p / "__init__.py").is_file())


def test_the_import_contracts_hold() -> None:
    """The layers, no package importing a sibling that imports it back, plugins through the public API."""
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert command, "import-linter is installed with the test extra"
    done = subprocess.run([command, "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "broken" not in done.stdout.lower().split("contracts:")[-1].replace("0 broken", "")


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(module: str) -> None:
        index[module] = low[module] = counter[0]
        counter[0] += 1
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module) & modules:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_back() -> None:
    """Module by module (function-level and type-checking imports included): a package's
    ``__init__`` re-exporting its modules counts, so a module must never import its own package."""
    graph = grimp.build_graph("harness", *PLUGIN_PACKAGES, cache_dir=None)
    modules = set(graph.modules)
    assert _cycles(graph, modules) == []


def test_no_core_module_imports_the_public_api() -> None:
    """``harness/__init__.py`` re-exports every layer: a core module importing it would depend on all of them."""
    graph = grimp.build_graph("harness", cache_dir=None)
    importers = {m for m in graph.find_modules_that_directly_import("harness") if m.startswith("harness.")}
    assert importers == set()


def test_no_core_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in CORE.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def _function_level_imports(path: Path) -> list[tuple[int, str]]:
    source = path.read_text()
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    line, above = lines[inner.lineno - 1], lines[inner.lineno - 2].strip()
                    if "#" not in line and "#" not in above:
                        found.append((inner.lineno, line.strip()))
    return found


def test_function_level_imports_in_the_core_say_why() -> None:
    """An import inside a function is there for start-up time or an optional dependency, and a
    comment on it (or the line above) says which. The commands (``harness/cli``) import inside
    their functions by rule (their package docstring says why): ``harness --help`` loads no numerics."""
    unexplained = {
        f"{path.relative_to(REPO)}:{line}": text
        for path in sorted(CORE.rglob("*.py"))
        if "cli" not in path.relative_to(CORE).parts
        for line, text in _function_level_imports(path)
    }
    assert unexplained == {}


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_help_and_plugin_discovery_import_no_component_code() -> None:
    """`harness --help` loads neither numpy nor pydantic; collecting every installed plugin's
    components and presets imports none of their modules (they load when a run uses them)."""
    after_help = _modules_after(
        "from harness.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )
    assert not {"numpy", "pydantic", "torch"} & after_help
    after = _modules_after(
        "from harness.plugins import get_plugin_manager\n"
        "m = get_plugin_manager(); m.components; m.presets()\n"
        "assert 'bm25' in m.components.by_kind['retriever'], m.failures"
    )
    component_modules = {m for m in after if m.startswith("harness_") and m.count(".") >= 1}
    # what entry points may import: the hooks module of each plugin and the hook specifications it offers
    allowed = {m for m in component_modules if m.endswith(".hookspecs")}
    assert component_modules - allowed == set()
    assert "torch" not in after


@pytest.mark.parametrize("kind", ["retriever", "dataset"])
def test_every_first_party_component_registered_by_path_loads(kind: str) -> None:
    """A component registered by path names its class and the name it registers: loading each
    checks both (a wrong path or name fails here, not in a user's run)."""
    from harness.plugins import PluginManager

    manager = PluginManager()
    found = manager.components.by_kind[kind]
    owners = {name: manager.components.owner[(kind, name)] for name in found}
    first_party = [name for name, owner in owners.items() if f"harness_{owner}" in PLUGIN_PACKAGES]
    assert first_party
    for name in first_party:
        try:
            cls = found[name]
        except Exception as exc:  # an optional extra missing (ColBERT, Lucene) is a skip, not a pass
            if "No module named" in str(exc) and not any(p in str(exc) for p in PLUGIN_PACKAGES):
                continue
            raise
        assert getattr(cls, "name", None) == name
