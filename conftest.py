"""Fixtures for every test (core and plugins): isolated caches and outputs, a fresh plugin manager,
and every in-process run checked against trec_eval."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness.plugins import PluginManager, get_plugin_manager, reset_plugin_manager


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the whole session, so the Debian BM25 index is built once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, session_cache: Path, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("HARNESS_CACHE", str(session_cache))
    monkeypatch.delenv("HARNESS_PLUGINS", raising=False)
    monkeypatch.delenv("HARNESS_PLUGINS_DIR", raising=False)
    monkeypatch.delenv("HARNESS_REGISTRY", raising=False)
    monkeypatch.chdir(tmp_path)
    reset_plugin_manager()
    yield
    reset_plugin_manager()


#: Run directories whose row the trec_eval references confirmed during this session.
CHECKED_RUNS: list[Path] = []


def _references_installed() -> bool:
    import importlib.util

    found = all(importlib.util.find_spec(m) is not None for m in ("pytrec_eval", "ir_measures"))
    return found or os.environ.get("HARNESS_REQUIRE_REFERENCES") == "1"


@pytest.fixture(autouse=True)
def _every_run_agrees_with_trec_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run the suite makes in-process is scored again by pytrec_eval and ir_measures from
    its run.trec and qrels.trec; a metric trec_eval defines must come out the same."""
    if not _references_installed():
        return
    from trec_reference import check_run_dir

    from harness.run import Runner

    original = Runner.run

    def run(self: Runner, spec: object) -> object:
        outcome = original(self, spec)  # type: ignore[arg-type]
        check_run_dir(outcome.run_dir)
        CHECKED_RUNS.append(outcome.run_dir)
        return outcome

    monkeypatch.setattr(Runner, "run", run)


@pytest.fixture
def plugins() -> PluginManager:
    return get_plugin_manager()


class TinyPlugin:
    @harness.hookimpl
    def register_datasets(self, register):  # type: ignore[no-untyped-def]
        from helpers import TinyDataset

        register(TinyDataset)

    @harness.hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        from helpers import OverlapRetriever

        register(OverlapRetriever)


@pytest.fixture
def tiny_plugins(plugins: PluginManager) -> PluginManager:
    plugins.register(TinyPlugin(), "tiny-test-plugin")
    return plugins


os.environ.setdefault("COLUMNS", "200")  # rich tables in CLI output stay on one line
