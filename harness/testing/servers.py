"""Fake servers on 127.0.0.1 for tests of plugins that call HTTP APIs: a JSON API of your own
(subclass :class:`JSONHandler`, run it with :func:`serve`) and a Hugging Face hub
(:func:`hub_server`, for ``HF_ENDPOINT``). Each listens on a free port (port 0), so tests
running in parallel never collide."""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class JSONHandler(http.server.BaseHTTPRequestHandler):
    """Base of the tests' fake API servers: JSON replies, no request log."""

    def send_json(self, status: int, payload: dict[str, Any]) -> None:
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
    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def hub_server(repos: dict[str, dict[str, tuple[str, Path]]]) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """A :class:`HubHandler` for ``repos`` on 127.0.0.1: yields its URL (for ``HF_ENDPOINT``)
    and the list of requests it receives."""
    requests: list[tuple[str, str]] = []
    handler = type("Hub", (HubHandler,), {"repos": repos, "requests": requests})
    with serve(handler) as url:
        yield url, requests
