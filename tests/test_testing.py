"""The testing kit (``harness.testing``) is all a plugin's tests take from the harness: the
first-party plugins' tests import nothing else of the core and none of the core's test helpers,
a missing optional dependency skips (or, under ``HARNESS_REQUIRE_REFERENCES=1``, fails) through
``require``, and the kit itself stays clear of the command line's modules."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import harness.testing
from harness.testing import invoke, require

REPO = Path(__file__).resolve().parent.parent
PLUGIN_TESTS = sorted(REPO.glob("plugins/*/tests/**/*.py"))
#: the core's own test modules, on the path of its tests only
CORE_TEST_HELPERS = {"helpers", "official", "stark_fixtures", "trec_reference", "conftest"}


def _imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_there_are_plugin_tests_to_check() -> None:
    assert len(PLUGIN_TESTS) > 20 and all(p.is_file() for p in PLUGIN_TESTS)


@pytest.mark.parametrize("path", PLUGIN_TESTS, ids=lambda p: str(p.relative_to(REPO / "plugins")))
def test_plugin_tests_import_only_the_public_api_and_the_kit(path: Path) -> None:
    wrong = []
    for line, module in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        top = module.split(".")[0]
        kit = module == "harness.testing" or module.startswith("harness.testing.")
        core = top == "harness" and module != "harness" and not kit
        if core or top in CORE_TEST_HELPERS:
            wrong.append(f"{path.name}:{line}: {module}")
    assert not wrong, "plugin tests import `harness` and `harness.testing` only, not:\n" + "\n".join(wrong)


@pytest.mark.parametrize("path", PLUGIN_TESTS, ids=lambda p: str(p.relative_to(REPO / "plugins")))
def test_plugin_tests_require_their_dependencies_through_the_kit(path: Path) -> None:
    """``pytest.importorskip`` skips whatever CI sets; ``harness.testing.require`` fails there."""
    calls = [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "importorskip"
    ]
    assert not calls, f"{path.name}: pytest.importorskip on lines {calls}: use harness.testing.require"


def test_require_returns_the_module_skips_without_it_and_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    assert require("json") is sys.modules["json"]
    monkeypatch.delenv("HARNESS_REQUIRE_REFERENCES", raising=False)
    missing = r"no_such_module_x is not installed \(pip install 'pkg\[extra\]'\)"
    with pytest.raises(pytest.skip.Exception, match=missing):
        require("no_such_module_x", extra="pkg[extra]")
    with pytest.raises(pytest.skip.Exception, match=r"not installed \(pip install --no-deps thing\)"):
        require("no_such_package_x.sub", install="pip install --no-deps thing")
    monkeypatch.setenv("HARNESS_REQUIRE_REFERENCES", "1")
    with pytest.raises(pytest.fail.Exception, match="HARNESS_REQUIRE_REFERENCES=1 requires"):
        require("no_such_module_x", extra="pkg[extra]")


def test_the_kit_leaves_the_command_line_and_pytest_unimported() -> None:
    code = (
        "import sys, harness.testing; "
        "loaded = [m for m in sys.modules if m.startswith('harness.cli') or m == 'pytest']; "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_invoke_runs_the_installed_command() -> None:
    result = invoke("--version")
    assert result.exit_code == 0 and harness.__version__ in result.stdout
    assert invoke("no-such-command").exit_code == 2


def test_the_kit_lists_what_it_exports() -> None:
    assert set(harness.testing.__all__) <= set(dir(harness.testing))
