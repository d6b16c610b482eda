"""Shared fixtures: isolated caches and outputs, a small hand-made SKB, a fresh plugin manager."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from harness.dataset import Dataset
from harness.plugins import PluginManager, get_plugin_manager, reset_plugin_manager
from harness.queries import Query, QuerySet
from harness.skb import SKB, EdgeType

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the whole session, so the Debian BM25 index is built once."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, session_cache: Path, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("HARNESS_CACHE", str(session_cache))
    monkeypatch.delenv("HARNESS_PLUGINS", raising=False)
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


class JSONHandler(http.server.BaseHTTPRequestHandler):
    """Base of the tests' fake API servers: JSON replies, no request log."""

    def send_json(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except BrokenPipeError:  # the client gave up on a slow answer: that is the point
            pass

    def send_raw(self, status: int, data: bytes, headers: dict[str, str]) -> None:
        """Any bytes with any headers (a reply that is not JSON, a Retry-After, ...)."""
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """Run ``handler`` on a free port of 127.0.0.1; yields the base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def tiny_skb() -> SKB:
    """Five products, two brands: small enough to reason about by hand."""
    names = ["red kettle", "blue kettle", "green teapot", "steel pan", "copper pot", "Acme", "Globex"]
    fields = [
        {"description": "an electric kettle in red, boils water fast"},
        {"description": "a blue stovetop kettle that whistles"},
        {"description": "a glass teapot for green tea"},
        {"description": "a steel frying pan"},
        {"description": "a heavy copper pot for soups"},
        {},
        {},
    ]
    src = np.array([0, 1, 2, 3, 4, 0])
    dst = np.array([5, 5, 6, 6, 6, 1])
    edge_type = np.array([0, 0, 0, 0, 0, 1])
    return SKB(
        name="tiny",
        node_type_names=["product", "brand"],
        node_types=np.array([0, 0, 0, 0, 0, 1, 1]),
        names=names,
        fields=fields,
        edge_types=[EdgeType("made_by", "brand", "makes"), EdgeType("similar", "similar to")],
        src=src,
        dst=dst,
        edge_type=edge_type,
        candidate_types=["product"],
    )


def debian_slice(step: int, count: int) -> SKB:
    """Every ``step``-th of the Debian packages, ``count`` of them, as a text-only SKB: real
    documents, quick to index."""
    from harness_debian import DebianDataset

    skb = DebianDataset().load_skb()
    ids = skb.candidate_ids[::step][:count]
    return SKB(
        name=f"debian-slice-{step}-{count}",
        node_type_names=["package"],
        node_types=np.zeros(len(ids)),
        names=[skb.names[i] for i in ids],
        fields=[skb.fields[i] for i in ids],
        edge_types=[],
        src=np.zeros(0),
        dst=np.zeros(0),
        edge_type=np.zeros(0),
    )


class TinyDataset(Dataset):
    """A dataset plugin built in the tests, registered like a third party's."""

    name = "tiny"

    def __init__(self, queries: list[list] | None = None) -> None:
        super().__init__(**({"queries": queries} if queries is not None else {}))
        rows = (
            queries
            if queries is not None
            else [
                [1, "red kettle that boils water", [0]],
                [2, "kettle", [0, 1]],
                [3, "copper pot for soups", [4]],
                [4, "glass teapot", [2]],
            ]
        )
        self._queries = QuerySet("tiny", {"test": [Query(q, t, tuple(a)) for q, t, a in rows]})

    def load_skb(self) -> SKB:
        return tiny_skb()

    def load_queries(self) -> QuerySet:
        return self._queries


class TinyPlugin:
    from harness.plugins.hookspecs import hookimpl

    @hookimpl
    def register_datasets(self, register):  # type: ignore[no-untyped-def]
        register(TinyDataset)


@pytest.fixture
def tiny_plugins(plugins: PluginManager) -> PluginManager:
    plugins.register(TinyPlugin(), "tiny-test-plugin")
    return plugins


def shared_available() -> bool:
    return (SHARED / "stark" / "qa").is_dir()


os.environ.setdefault("COLUMNS", "200")  # rich tables in CLI output stay on one line
