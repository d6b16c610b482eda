"""Helpers the tests share: fake API servers on 127.0.0.1, small SKBs, a tiny dataset.

Importable from any test (``from helpers import serve``): pytest puts ``tests/`` on the path.
"""

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

from harness import SKB, Dataset, EdgeType, Query, QuerySet

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


def stark_data_dir() -> Path | None:
    """``$STARK_DATA_DIR``: real STaRK files in the official layout (``qa/<name>/...``), which the
    tests that read real query sets use; ``.ci/run`` points it at ``../shared/stark``."""
    value = os.environ.get("STARK_DATA_DIR")
    return Path(value) if value and (Path(value) / "qa").is_dir() else None


#: skip unless $STARK_DATA_DIR holds the real STaRK query sets
needs_stark_data = pytest.mark.skipif(stark_data_dir() is None, reason="set STARK_DATA_DIR to the STaRK files")

