"""Two processes run one configuration of API embeddings against a fault-injecting
OpenAI-compatible server on 127.0.0.1 (429 with Retry-After, 500, 200 replies that are not
JSON, vectors with NaN, at a seeded rate): both exit 0 with exactly the metrics of a reference
run against a fault-free server. Every run is the installed ``harness`` command, with the
dataset as a single-file plugin (``--plugins-dir``)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from harness.testing import JSONHandler, check_run_dir, serve

#: A synthetic dataset: documents of made-up words, queries drawn from one document each; and
#: small request batches, so that there are many requests.
PLUGIN = textwrap.dedent(
    """
    import random

    import numpy as np

    import harness
    from harness_dense import api

    api.LIMITS["openai"] = api.Limits(max_inputs=12, max_tokens=100_000)

    rng = random.Random(7)
    WORDS = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)) for _ in range(150)]
    DOCS = [rng.sample(WORDS, 8) for _ in range(240)]


    class StressDataset(harness.Dataset):
        name = "stress"

        def load_skb(self):
            return harness.SKB(
                name="stress",
                node_type_names=["doc"],
                node_types=np.zeros(len(DOCS)),
                names=[f"doc {i}" for i in range(len(DOCS))],
                fields=[{"text": " ".join(words)} for words in DOCS],
                edge_types=[],
                src=np.zeros(0),
                dst=np.zeros(0),
                edge_type=np.zeros(0),
            )

        def load_queries(self):
            picks = random.Random(11)
            queries = []
            for q in range(40):
                target = picks.randrange(len(DOCS))
                words = picks.sample(DOCS[target], 3) + [picks.choice(WORDS)]
                queries.append(harness.Query(q, " ".join(words), (target,)))
            return harness.QuerySet("stress", {"test": queries})


    @harness.hookimpl
    def register_datasets(register):
        register(StressDataset)
    """
)

HARNESS = Path(sys.executable).with_name("harness")  # the command a user runs
DIM = 64


def embedding(text: str) -> list[float]:
    """Texts sharing words are close: each word adds one at a position hashed from it."""
    vector = [0.0] * DIM
    for word in re.findall(r"[a-z]+", text.lower()):
        vector[zlib.crc32(word.encode()) % DIM] += 1.0
    return vector


FAULTS = ("429", "500", "html", "nan")


def _server(rate: float, seed: int) -> type[JSONHandler]:
    class Embeddings(JSONHandler):
        lock = threading.Lock()
        rng = random.Random(seed)
        streak: ClassVar[Counter[str]] = Counter()  # consecutive faults per request body
        injected: ClassVar[Counter[str]] = Counter()

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(raw)
            digest = hashlib.sha1(raw).hexdigest()
            with self.lock:
                # at most 3 faults in a row for one request, so a client with 6 retries heals
                fault = "ok"
                if self.streak[digest] < 3 and self.rng.random() < rate:
                    fault = self.rng.choice(FAULTS)
                self.streak[digest] = self.streak[digest] + 1 if fault != "ok" else 0
                self.injected[fault] += 1
            texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
            data = [{"object": "embedding", "index": i, "embedding": embedding(t)} for i, t in enumerate(texts)]
            if fault == "nan":
                data[-1]["embedding"][0] = float("nan")
            if fault in ("429", "500"):
                payload = json.dumps({"error": {"message": f"injected {fault}"}}).encode()
                self._send(int(fault), payload, "application/json", {"Retry-After": "0.05"} if fault == "429" else {})
            elif fault == "html":
                self._send(200, b"<html>upstream hiccup</html>", "text/html", {})
            else:
                usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
                reply = {"object": "list", "model": body["model"], "data": data, "usage": usage}
                self._send(200, json.dumps(reply).encode(), "application/json", {})

        def _send(self, status: int, data: bytes, kind: str, headers: dict[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Embeddings


def _workdir(root: Path, url: str) -> tuple[Path, dict[str, str]]:
    root.mkdir()
    (root / "plugins").mkdir()
    (root / "plugins" / "stress_plugin.py").write_text(PLUGIN)
    (root / "registry.yaml").write_text(
        "datasets:\n"
        "  stress: {plugin: stress, splits: [test]}\n"
        "retrievers:\n"
        "  api-dense:\n"
        "    plugin: dense\n"
        f"    params: {{provider: openai, model: text-embedding-3-small, base_url: '{url}/v1', backoff: 0.01, "
        "timeout: 5}\n"
    )
    env = {**os.environ, "HARNESS_CACHE": str(root / "cache"), "OPENAI_API_KEY": "sk-stress-test"}
    return root, env


def _start(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    args = [str(HARNESS), "--plugins-dir", str(root / "plugins"), "run", "-r", "api-dense", "-d", "stress"]
    args += ["-s", "test", "--format", "json"]
    return subprocess.Popen(args, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _outcome(process: subprocess.Popen[str], root: Path, deadline: float) -> dict[str, Any]:
    """The process's outcome, its row checked against trec_eval (it ran outside this process)."""
    try:
        out, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"harness run still running at the deadline: {err[-3000:]}") from None
    assert process.returncode == 0, err[-3000:]
    outcome = json.loads(out)[0]
    check_run_dir(root / outcome["run_dir"])  # relative to the directory it ran in
    return outcome


@pytest.mark.slow
def test_two_processes_against_a_faulty_api_get_the_reference_metrics(tmp_path: Path) -> None:
    deadline = time.monotonic() + 180  # bounded, with room for a loaded 2-core CI machine
    with serve(_server(rate=0.0, seed=0)) as clean_url:
        root, env = _workdir(tmp_path / "reference", clean_url)
        reference = _outcome(_start(root, env), root, deadline)["row"]["metrics"]
    assert reference["hit@1"] > 0.5  # the task is not trivial to get right by accident

    handler = _server(rate=0.35, seed=12)
    with serve(handler) as faulty_url:
        root, env = _workdir(tmp_path / "faulty", faulty_url)
        processes = [_start(root, env), _start(root, env)]  # one configuration, at once
        try:
            got = [_outcome(process, root, deadline)["row"]["metrics"] for process in processes]
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    assert got == [reference, reference]
    assert all(handler.injected[fault] > 0 for fault in FAULTS), handler.injected
    cached = [np.load(p) for p in (root / "cache" / "embeddings").rglob("vectors-*.npy")]
    assert cached and all(np.isfinite(v).all() for v in cached)
    assert time.monotonic() < deadline
