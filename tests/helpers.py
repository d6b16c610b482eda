"""Helpers the tests share: fake API servers on 127.0.0.1, small SKBs, a tiny dataset, a fake
retriever.

Importable from any test, core or plugin (``from helpers import serve``): pytest puts
``tests/`` on the path. Core tests use fakes only: ``OverlapRetriever`` and ``TinyDataset``
here, or the plugin authors' kit in ``harness.testing``; ``debian_slice`` is for the tests of
first-party plugins, which have the Debian dataset installed beside them.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import Field

import harness
from harness import SKB, BuildContext, Dataset, EdgeType, Query, QuerySet, Ranking, Retriever

REPO = Path(__file__).resolve().parent.parent


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


class HubHandler(http.server.BaseHTTPRequestHandler):
    """A Hugging Face hub as ``huggingface_hub`` sees it under ``HF_ENDPOINT``: the repository
    info API (``/api/models/{repo}[/revision/{rev}]``, ``/api/datasets/...``) and files by
    revision (HEAD and GET ``/{repo}/resolve/{rev}/{file}``, ``/datasets/{repo}/resolve/...``)
    with the ETag, X-Repo-Commit and Content-Length headers it reads; any other path answers 200
    (the harness's probe of the endpoint). Subclass with ``repos``: ``"model:org/name"`` (or
    ``"dataset:org/name"``) → ``{revision: (commit, directory)}``, a branch and its commit both
    listed; every request is appended to ``requests`` as ``(method, path)``."""

    repos: dict[str, dict[str, tuple[str, Path]]]
    requests: list[tuple[str, str]]

    def _route(self) -> tuple[str, str, str, str | None] | None:
        """(kind, repo, revision, file or None for the info API), or None for another path."""
        path = self.path.split("?")[0]
        if path.startswith("/api/"):
            kind, _, rest = path[len("/api/") :].partition("/")
            repo, _, revision = rest.partition("/revision/")
            return kind.removesuffix("s"), repo, revision or "main", None
        kind = "dataset" if path.startswith("/datasets/") else "model"
        before, found, after = path.removeprefix("/datasets").lstrip("/").partition("/resolve/")
        if not found:
            return None
        revision, _, file = after.partition("/")
        return kind, before, revision, file

    def _reply(self, body: bool) -> None:
        self.requests.append((self.command, self.path))
        route = self._route()
        if route is None:
            self._send(200, b"", {})
            return
        kind, repo, revision, file = route
        revisions = self.repos.get(f"{kind}:{repo}")
        if revisions is None:
            self._send(404, b"{}", {"X-Error-Code": "RepoNotFound"})
            return
        if revision not in revisions:
            self._send(404, b"{}", {"X-Error-Code": "RevisionNotFound"})
            return
        commit, root = revisions[revision]
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        if file is None:
            info = {"id": repo, "sha": commit, "private": False, "siblings": [{"rfilename": f} for f in files]}
            self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body)
            return
        if file not in files:
            self._send(404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit})
            return
        data = (root / file).read_bytes()
        etag = f'"{stable_etag(data)}"'
        self._send(200, data, {"X-Repo-Commit": commit, "ETag": etag}, body)

    def _send(self, status: int, data: bytes, headers: dict[str, str], body: bool = True) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_HEAD(self) -> None:
        self._reply(body=False)

    def do_GET(self) -> None:
        self._reply(body=True)

    def log_message(self, *args: object) -> None:
        pass


def stable_etag(data: bytes) -> str:
    """The hub's ETag of a file: its SHA-256 for LFS files (any stable digest will do here)."""
    import hashlib

    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def hub_server(repos: dict[str, dict[str, tuple[str, Path]]]) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """A :class:`HubHandler` for ``repos`` on 127.0.0.1: yields its URL (for ``HF_ENDPOINT``)
    and the list of requests it receives."""
    requests: list[tuple[str, str]] = []
    handler = type("Hub", (HubHandler,), {"repos": repos, "requests": requests})
    with serve(handler) as url:
        yield url, requests


def tiny_skb() -> SKB:
    """Five products, two brands: small enough to reason about by hand.

    Plainer than ``harness.testing.tiny_skb`` (no multi-edge, self-loop, unicode or list
    field): the documents, neighbours, counts and scores the tests expect were worked out by
    hand on this one, so it stays as it is."""
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
    documents, quick to index. Needs the Debian plugin: for first-party plugins' tests only."""
    from harness_debian.dataset import DebianDataset

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
    """A dataset plugin built in the tests, registered like a third party's (the root
    conftest's ``tiny_plugins``).

    Unlike ``harness.testing.TinyDataset`` it takes its queries as a parameter (tests that
    check how bad answer ids or a query set's changes are handled give their own), and its
    default is the four hand-checked queries over :func:`tiny_skb` whose scores, counts and
    config hashes tests assert. Both are named "tiny": register one or the other, never both."""

    name = "tiny"

    class Options(harness.Options):
        queries: list[list] | None = Field(None, description="[id, text, [answer ids]] rows instead of the four")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        queries = self.options.queries
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


def stark_data_dir() -> Path | None:
    """``$STARK_DATA_DIR``: real STaRK files in the official layout (``qa/<name>/...``), which the
    tests that read real query sets use; ``.ci/run`` points it at ``../shared/stark``."""
    value = os.environ.get("STARK_DATA_DIR")
    return Path(value) if value and (Path(value) / "qa").is_dir() else None


#: skip unless $STARK_DATA_DIR holds the real STaRK query sets
needs_stark_data = pytest.mark.skipif(stark_data_dir() is None, reason="set STARK_DATA_DIR to the STaRK files")


class OverlapRetriever(Retriever):
    """A fake lexical retriever: scores candidates by the number of query words in their
    document; ties in id order. What core tests run instead of a first-party plugin."""

    name = "overlap"
    version = "1"

    class Options(harness.Options):
        with_relations: bool = Field(False, description="score documents with their relations")
        min_overlap: int = Field(1, ge=0, description="leave out candidates sharing fewer words")

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids
        relations = self.options.with_relations
        self.docs = [set(skb.document(int(i), with_relations=relations).lower().split()) for i in self.ids]

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        rankings = []
        for query in queries:
            words = set(query.text.lower().split())
            scores = np.array([len(words & doc) for doc in self.docs], dtype=np.float64)
            order = np.lexsort((self.ids, -scores))
            order = order[scores[order] >= max(self.options.min_overlap, 0)][:k]
            rankings.append(Ranking(self.ids[order], scores[order]))
        return rankings


def run_two(script: str) -> list[str]:
    """Run ``script`` in two Python processes at once; both must succeed. Their outputs."""
    children = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        outputs.append(out)
    return outputs


CONTRIBUTING = (REPO / "CONTRIBUTING.md").read_text()


def contributing_block(pattern: str) -> str:
    """The code block of CONTRIBUTING.md whose text matches ``pattern`` (a regex)."""
    import re

    for block in re.findall(r"```\w*\n(.*?)```", CONTRIBUTING, flags=re.DOTALL):
        if re.search(pattern, block):
            return block
    raise AssertionError(f"CONTRIBUTING.md has no code block matching {pattern!r}")


def install_contributing_plugin(workdir: Path) -> tuple[list[str], dict[str, str]]:
    """CONTRIBUTING's example plugin, laid out and installed as the guide says: its two files
    in ``harness-keyword-overlap/``, then the documented ``pip install -e`` (into ``workdir/site``
    with ``--target``, so the test environment is left alone). Returns the command that runs
    the harness CLI with that install on its path (``.pth`` files processed, as in a
    site-packages) and the environment for it."""
    import shlex

    project = workdir / "harness-keyword-overlap"
    project.mkdir(parents=True)
    (project / "keyword_overlap.py").write_text(contributing_block(r"\A# keyword_overlap\.py\n"))
    (project / "pyproject.toml").write_text(contributing_block(r"\A\[build-system\]"))
    install = next(
        shlex.split(line)
        for line in contributing_block(r"pip install -e ./harness-keyword-overlap").splitlines()
        if line.startswith("pip install")
    )
    site = workdir / "site"
    # the documented command; --no-deps: stark-harness and numpy are installed already
    command = [sys.executable, "-m", *install, "--no-deps", "--target", str(site), "--quiet"]
    built = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    assert built.returncode == 0, f"{shlex.join(command)} failed:\n{built.stdout}{built.stderr}"
    env = {**os.environ, "COLUMNS": "200"}
    harness_cli = [
        sys.executable,
        "-c",
        f"import site; site.addsitedir({str(site)!r}); import harness.cli as c; c.main()",
    ]
    return harness_cli, env


class ComponentsPlugin:
    """A plugin registering the datasets and retrievers it is given, and one presets file."""

    def __init__(self, datasets: Sequence[type], retrievers: Sequence[type], presets: Path) -> None:
        self.datasets, self.retrievers, self.presets = datasets, retrievers, presets

    @harness.hookimpl
    def register_datasets(self, register):  # type: ignore[no-untyped-def]
        for dataset in self.datasets:
            register(dataset)

    @harness.hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        for retriever in self.retrievers:
            register(retriever)

    @harness.hookimpl
    def register_presets(self, register):  # type: ignore[no-untyped-def]
        register(self.presets)


def installed_alone(
    monkeypatch: pytest.MonkeyPatch,
    directory: Path,
    presets: str,
    datasets: Sequence[type],
    retrievers: Sequence[type],
    name: str = "components-plugin",
) -> Any:
    """The process-wide plugin manager with no installed plugin, only a :class:`ComponentsPlugin`
    (registered as ``name``) of these components and ``presets`` (YAML, written into ``directory``)."""
    from harness.plugins import get_plugin_manager, reset_plugin_manager

    monkeypatch.setenv("HARNESS_PLUGINS", "")
    reset_plugin_manager()
    (directory / "presets.yaml").write_text(presets)
    manager = get_plugin_manager()
    manager.register(ComponentsPlugin(datasets, retrievers, directory / "presets.yaml"), name)
    return manager
