"""API embeddings through the official SDKs, against a real HTTP server on 127.0.0.1 that
speaks the providers' embeddings API and injects rate limits, server errors, slow and
malformed responses."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness import BuildContext, HarnessError, Query
from harness.testing import JSONHandler, run_retriever, serve, tiny_skb
from harness_dense import retrievers
from harness_dense.api import LIMITS, Limits, batches
from harness_dense.retrievers import DenseRetriever, MultiVectorRetriever

KEY = "sk-test-0123456789-secret"
DIM = 64


def bag_of_words(text: str) -> list[float]:
    """A deterministic embedding in which texts sharing words are close."""
    vector = np.zeros(DIM)
    for word in re.findall(r"[a-z]+", text.lower()):
        vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
    return (vector / (np.linalg.norm(vector) or 1)).tolist()


class FakeProvider(JSONHandler):
    faults: deque[str]
    log: list[dict]
    lock = threading.Lock()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            fault = self.faults.popleft() if self.faults else "ok"
            self.log.append(
                {
                    "at": time.monotonic(),
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "fault": fault,
                    "n": len(body["input"]),
                    "input_type": body.get("input_type"),
                }
            )
        if fault.startswith("429:"):  # a rate limit that says when to come back
            self.send_raw(
                429, b'{"detail": "slow down", "error": {"message": "slow down"}}', {"Retry-After": fault[4:]}
            )
        elif fault in ("429", "500", "503"):
            self.send_json(int(fault), {"error": {"message": f"injected {fault}", "type": "server_error"}})
        elif fault == "html":  # a 200 that is not JSON (a proxy's error page)
            self.send_raw(200, b"<html><body>502 Bad Gateway</body></html>", {"Content-Type": "text/html"})
        elif fault in ("nan", "inf", "ragged", "short", "narrow"):
            self.send_json(200, self._bad(body, fault))
        elif fault == "slow":
            time.sleep(1.5)
            self.send_json(200, self._ok(body))
        elif fault == "malformed":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"data": [ {"embedding": [0.1, ')
        elif fault == "400":
            self.send_json(400, {"error": {"message": "invalid model", "type": "invalid_request_error"}})
        else:
            self.send_json(200, self._ok(body))

    def _bad(self, body: dict, fault: str) -> dict:
        """A 200 reply in the right shape whose vectors are wrong."""
        reply = self._ok(body)
        first = reply["data"][0]["embedding"]
        if fault in ("nan", "inf"):
            first[3] = float(fault)  # json.dumps writes NaN / Infinity, which Python's parser accepts
        elif fault == "ragged":
            reply["data"][-1]["embedding"] = first[:-1]
        elif fault == "short":
            reply["data"] = reply["data"][:-1] if len(reply["data"]) > 1 else []
        else:  # narrow: consistent, but not the dimension of the other replies
            for item in reply["data"]:
                item["embedding"] = item["embedding"][: DIM // 2]
        return reply

    def _ok(self, body: dict) -> dict:
        tokens = sum(len(t.split()) for t in body["input"])
        return {
            "object": "list",
            "model": body["model"],
            "data": [
                {"object": "embedding", "index": i, "embedding": bag_of_words(t)} for i, t in enumerate(body["input"])
            ],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeProvider]]:
    handler = type("Provider", (FakeProvider,), {"faults": deque(), "log": []})
    with serve(handler) as base:
        handler.url = f"{base}/v1"  # type: ignore[attr-defined]
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("VOYAGE_API_KEY", KEY)
        yield handler


def _dense(provider: type[FakeProvider], name: str = "openai", **extra: object) -> DenseRetriever:
    return DenseRetriever(
        model="text-embedding-3-small" if name == "openai" else "voyage-3",
        provider=name,
        base_url=provider.url,
        timeout=0.5,
        backoff=0.01,
        **extra,
    )  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["openai", "voyage"])
def test_retries_every_fault_then_retrieves(provider: type[FakeProvider], tmp_path: Path, name: str) -> None:
    provider.faults.extend(["429", "500", "slow", "malformed", "503"])
    retriever = _dense(provider, name)
    retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    ranking = retriever.search([Query(1, "heavy copper pot for soups", (4,))], 3)[0]
    assert ranking.ids[0] == 4
    usage = retriever.usage()
    assert usage["retries"] == 5 and usage["provider"] == name
    assert usage["tokens"] > 0 and usage["cost_usd"] == pytest.approx(
        usage["tokens"] * (0.02 if name == "openai" else 0.06) / 1e6
    )
    assert all(entry["auth"] == f"Bearer {KEY}" for entry in provider.log)
    if name == "voyage":
        assert {e["input_type"] for e in provider.log} == {"document", "query"}


def test_second_run_pays_nothing_and_keys_are_never_written(provider: type[FakeProvider], tmp_path: Path) -> None:
    first = _dense(provider)
    first.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    paid = len(provider.log)
    second = _dense(provider)
    second.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    assert len(provider.log) == paid  # every document came from the cache
    second.search([Query(1, "kettle", (0,))], 2)
    assert len(provider.log) == paid + 1  # only the query was sent
    for file in tmp_path.rglob("*"):
        if file.is_file():
            assert KEY.encode() not in file.read_bytes(), file
    assert KEY not in json.dumps(second.params) and KEY not in json.dumps(second.usage())


def test_interrupted_encoding_keeps_what_was_paid_for(
    provider: type[FakeProvider], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(LIMITS, "openai", Limits(max_inputs=2, max_tokens=10_000))
    provider.faults.extend(["ok", "400"])  # the second request fails for good
    retriever = _dense(provider, concurrency=1)
    with pytest.raises(HarnessError, match="invalid model"):
        retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    sent_before = sum(e["n"] for e in provider.log)
    bought = sum(e["n"] for e in provider.log if e["fault"] == "ok")
    assert 2 <= bought < 5
    retriever = _dense(provider, concurrency=1)
    retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    resent = sum(e["n"] for e in provider.log) - sent_before
    assert resent == 5 - bought  # what the failed run paid for was kept, and not bought again


def test_gives_up_after_bounded_retries(provider: type[FakeProvider], tmp_path: Path) -> None:
    provider.faults.extend(["500"] * 20)
    retriever = _dense(provider)
    with pytest.raises(HarnessError, match="failed after 7 attempts"):
        retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))


def test_missing_key_is_a_clear_error(
    provider: type[FakeProvider], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(HarnessError, match=r"need an API key in \$OPENAI_API_KEY"):
        _dense(provider).build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    with pytest.raises(HarnessError, match="provider: Input should be 'local', 'openai' or 'voyage'"):
        DenseRetriever(provider="cohere")
    with pytest.raises(HarnessError, match="base_url: for provider openai or voyage only"):
        DenseRetriever(base_url="http://x")
    with pytest.raises(HarnessError, match="query_prefix, max_length: for provider local only"):
        DenseRetriever(provider="openai", model="text-embedding-3-small", query_prefix="query: ", max_length=64)


def test_batches_respect_provider_limits() -> None:
    texts = ["word " * 100] * 10 + ["x"] * 5
    groups = batches(texts, Limits(max_inputs=4, max_tokens=400))
    assert sum(len(g) for g in groups) == 15 and all(len(g) <= 4 for g in groups)
    assert [i for g in groups for i in g] == list(range(15))


def test_multi_vector_with_api_embeddings(provider: type[FakeProvider], tmp_path: Path) -> None:
    retriever = MultiVectorRetriever(
        model="text-embedding-3-small",
        provider="openai",
        base_url=provider.url,  # type: ignore[attr-defined]
        chunk_size=40,
        overlap=8,
        backoff=0.01,
    )
    retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    assert retriever.search([Query(1, "copper pot soups", (4,))], 2)[0].ids[0] == 4


def _cached_vectors(root: Path) -> np.ndarray:
    shards = sorted((root / "embeddings").rglob("vectors-*.npy"))
    return np.concatenate([np.load(p) for p in shards]) if shards else np.zeros((0, DIM))


@pytest.mark.parametrize("name", ["openai", "voyage"])
def test_bad_vectors_are_retried_and_never_cached(provider: type[FakeProvider], tmp_path: Path, name: str) -> None:
    """NaN, infinity, vectors of different lengths, one vector short, another dimension and a
    200 that is not JSON: each is retried, and only good vectors reach the cache and rankings."""
    provider.faults.extend(["nan", "ragged", "html", "short", "inf", "ok", "narrow"])  # documents, then the query
    retriever = _dense(provider, name, concurrency=1)
    retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    ranking = retriever.search([Query(1, "heavy copper pot for soups", (4,))], 5)[0]
    assert ranking.ids[0] == 4 and np.isfinite(ranking.scores).all()
    assert [e["fault"] for e in provider.log] == ["nan", "ragged", "html", "short", "inf", "ok", "narrow", "ok"]
    assert retriever.usage()["retries"] == 6
    cached = _cached_vectors(tmp_path)
    assert len(cached) == 5 and np.isfinite(cached).all() and cached.shape[1] == DIM


@pytest.mark.parametrize("fault", ["nan", "inf", "ragged", "short", "html"])
def test_each_bad_reply_is_retried(provider: type[FakeProvider], tmp_path: Path, fault: str) -> None:
    provider.faults.append(fault)
    retriever = _dense(provider, concurrency=1)
    retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    assert [e["fault"] for e in provider.log] == [fault, "ok"] and retriever.usage()["retries"] == 1
    assert np.isfinite(_cached_vectors(tmp_path)).all()


def test_a_reply_with_nan_forever_is_one_clear_error(provider: type[FakeProvider], tmp_path: Path) -> None:
    provider.faults.extend(["nan"] * 20)
    with pytest.raises(HarnessError) as failure:
        _dense(provider).build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    message = str(failure.value)
    assert message.startswith("openai embeddings (text-embedding-3-small) failed after 7 attempts")
    assert "NaN or infinity" in message
    assert len(_cached_vectors(tmp_path)) == 0  # nothing bad was kept


def test_a_dimension_other_than_asked_for_is_retried(provider: type[FakeProvider], tmp_path: Path) -> None:
    """With ``dimensions`` given, a reply of another length is a fault, not a new normal."""
    provider.faults.extend(["narrow"] * 20)
    with pytest.raises(HarnessError, match=f"dimension {DIM // 2}, expected {DIM}"):
        _dense(provider, dimensions=DIM).build(tiny_skb(), BuildContext(cache_dir=tmp_path))


@pytest.mark.parametrize("name", ["openai", "voyage"])
def test_retry_after_is_honoured(provider: type[FakeProvider], tmp_path: Path, name: str) -> None:
    provider.faults.append("429:1")  # backoff is 0.01 s: only the header explains a 1 s wait
    retriever = _dense(provider, name)
    retriever.build(tiny_skb(), BuildContext(cache_dir=tmp_path))
    first, second = provider.log[0], provider.log[1]
    assert first["fault"] == "429:1" and second["fault"] == "ok"
    assert 1.0 <= second["at"] - first["at"] < 3.0


def test_rows_record_the_api_settings_that_ran(
    provider: type[FakeProvider], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OpenAI row records concurrency, timeout, backoff and dimensions with the values that
    ran; writing a derived default out changes nothing, and changing it (a release with another
    default) changes the recorded parameters and the config hash, so old results are not reused."""
    base = {"provider": "openai", "model": "text-embedding-3-small", "base_url": provider.url}  # type: ignore[attr-defined]

    def row(**extra: object) -> Any:
        """The row of one run of the dense retriever with these parameters."""
        return run_retriever(DenseRetriever, {**base, **extra}, tmp_path, fresh=False).row

    derived = row()
    params = derived.retriever.params
    assert {name: params[name] for name in ("concurrency", "timeout", "backoff", "dimensions")} == {
        "concurrency": 4,
        "timeout": 60.0,
        "backoff": 1.0,
        "dimensions": None,  # not sent: the model's own length
    }
    assert row(concurrency=4, timeout=60, backoff=1.0).config_hash == derived.config_hash
    other = row(concurrency=2)
    assert other.config_hash != derived.config_hash
    monkeypatch.setitem(retrievers.API_DEFAULTS, "concurrency", 2)
    changed = row()
    assert changed.retriever.params["concurrency"] == 2
    assert changed.config_hash == other.config_hash != derived.config_hash
