"""The Ray executor against a real local Ray cluster (head on 127.0.0.1, 2 CPU workers).

``--executor ray`` must give byte for byte the run a local run gives — run.trec, per-query
metrics, the row's metrics, the configuration hash — for BM25, dense MiniLM (documents encoded
on the workers, written into the cache by the driver) and the SmolLM2 reranker (its LLM calls on
the workers, their tokens summed into the row), on a Debian sample. A worker killed with SIGKILL
mid-shard changes nothing; no cluster, and no Ray, are one clear error each.
"""

from __future__ import annotations

import functools
import importlib.util
import ipaddress
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

import harness
from harness import SKB, HarnessError, Query, write_stark_csv
from harness.testing import JSONHandler, installed_plugins, invoke, require, run, serve

require("ray", install="pip install -e ./plugins/harness-ray")
require("harness_debian", extra="stark-harness-debian")

from harness_dense.embeddings import LocalEncoder  # noqa: E402  (after the requirements: skipped without them)
from harness_ray.executor import RayExecutor  # noqa: E402
from harness_ray.testing import cluster_processes, listening, local_cluster, processes_of  # noqa: E402

#: test queries of the sample, and every how-many-th package joins their answers as candidates
QUERIES, STEP = 6, 800
#: how each retriever runs: the split (the LLM, slow on a CPU, answers 2 queries) and the batch
#: size (shards are whole batches: 3 shards of the 6 queries, 2 of the 2, so both workers work)
RUNS = {
    "bm25": ("test", 2),
    "dense": ("test", 2),
    "smollm2-rerank": ("pair", 1),
    "marked": ("test", 2),
    "api-dense": ("test", 1),
}
#: the key the API encoders read, here and (set where the cluster starts) on the workers
KEY = "sk-test-0123456789-secret"
#: seconds a map waits for its workers to start: generous, for a loaded 2-core machine, yet bounded
WORKER_START = 600


# -- what runs: a Debian sample as a `local` dataset, a registry ------------------------------
def _write_sample(root: Path) -> None:
    """The first test queries of Debian and an induced sub-SKB: their answers, every STEP-th
    package, and the other nodes those link to (so the reranker's documents have relations)."""
    from harness_debian.dataset import DebianDataset

    dataset = DebianDataset()
    skb, queries = dataset.load_skb(), dataset.load_queries().split("test")[:QUERIES]
    keep = {int(a) for q in queries for a in q.answer_ids} | set(skb.candidate_ids[::STEP].tolist())
    seeds = np.asarray(sorted(keep))
    linked = np.concatenate([skb.dst[np.isin(skb.src, seeds)], skb.src[np.isin(skb.dst, seeds)]])
    nodes = np.unique(np.concatenate([seeds, linked[~skb.is_candidate(linked)]]))  # few candidates: fast to encode
    new = np.full(skb.num_nodes, -1, dtype=np.int64)
    new[nodes] = np.arange(len(nodes))
    edges = (new[skb.src] >= 0) & (new[skb.dst] >= 0)
    sample = SKB(
        name="debian-sample",
        node_type_names=skb.node_type_names,
        node_types=skb.node_types[nodes],
        names=[skb.names[i] for i in nodes],
        fields=[dict(skb.fields[i]) for i in nodes],
        edge_types=skb.edge_types,
        src=new[skb.src[edges]],
        dst=new[skb.dst[edges]],
        edge_type=skb.edge_type[edges],
        candidate_types=skb.candidate_types,
        undirected=skb.undirected,
    )
    sample.save(root / "skb")
    remapped = [Query(q.id, q.text, [int(new[a]) for a in q.answer_ids]) for q in queries]
    (root / "qa" / "split").mkdir(parents=True)
    (root / "qa" / "stark_qa").mkdir()
    write_stark_csv(root / "qa" / "stark_qa" / "stark_qa.csv", remapped)
    (root / "qa" / "split" / "test.index").write_text("".join(f"{q.id}\n" for q in remapped))
    (root / "qa" / "split" / "pair.index").write_text("".join(f"{q.id}\n" for q in remapped[:2]))


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, smollm2_model: Path) -> Path:
    """The sample and the retrievers; SmolLM2 from the transformers directory the conftest
    converted once (each worker loads it: from the GGUF, a de-quantization each)."""
    root = tmp_path_factory.mktemp("sample")
    _write_sample(root / "data")
    path = root / "registry.yaml"
    path.write_text(
        "datasets:\n"
        f"  sample: {{plugin: local, params: {{data_dir: '{root / 'data'}'}}, splits: [test, pair]}}\n"
        "retrievers:\n"
        "  smollm2-rerank:\n"
        "    plugin: llm-reranker\n"
        f"    params: {{first_stage: bm25, candidates: 2, llm: 'local:{smollm2_model}', doc_chars: 200}}\n"
        "  api-dense:\n"
        "    plugin: dense\n"
        "    params: {provider: openai, model: text-embedding-3-small, concurrency: 1, base_url: BASE_URL}\n"
    )
    return path


# -- the cluster: `ray start --head` on 127.0.0.1 (harness_ray.testing), stopped by the ids of its processes
@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """The address of a Ray cluster of this machine: a head with 2 CPUs (so 2 worker processes)."""
    # the workers' environment is the cluster's: an API key is set where `ray start` runs
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "OPENAI_API_KEY": KEY}
    with local_cluster(cpus=2, env=env) as address:
        yield address


@pytest.fixture(scope="module")
def ray_executor(cluster: str) -> Iterator[RayExecutor]:
    """One executor for the module's runs: one driver, its worker actors kept between runs."""
    with RayExecutor(address=cluster, worker_start_timeout=WORKER_START, connect_timeout=WORKER_START) as executor:
        yield executor


def _run(registry: Path, retriever: str, out: Path, executor: Any = None) -> Any:
    """A run in a cache of its own (so the second of two runs computes everything again)."""
    cache = out / "cache"
    os.environ["HARNESS_CACHE"] = str(cache)  # the SKB's and LLM answers' cache too (the autouse fixture restores it)
    split, batch_size = RUNS[retriever]
    return run(
        retriever,
        "sample",
        split,
        plugins=installed_plugins(),
        registry=registry,
        k=20,
        metrics=None,
        output_dir=out / "runs",
        cache_dir=cache,
        batch_size=batch_size,
        executor=executor,
    )


def _metrics(run_dir: Path) -> list[tuple[int, dict[str, float]]]:
    lines = [json.loads(line) for line in (run_dir / "per_query.jsonl").read_text().splitlines()]
    return [(line["qid"], line["metrics"]) for line in lines]


def _logged_once(run_dir: Path, queries: int) -> None:
    qids = [json.loads(line)["qid"] for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(qids) == len(set(qids)) == queries


# -- no cluster, no Ray: one clear error each (before any cluster starts) ----------------------
def test_no_cluster_reachable_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    if current.exists() or processes_of("gcs_server"):
        pytest.skip("a Ray cluster runs on this machine: --address auto would find it")
    with pytest.raises(HarnessError, match=r"no Ray cluster reachable at --address auto.*`ray start --head`"):
        with RayExecutor(address="auto") as executor:
            list(executor.map(int, ["1"], description="probe"))


def test_without_ray_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(HarnessError, match=r"pip install 'stark-harness-ray'"):
        RayExecutor()
    with pytest.raises(HarnessError, match=r"unknown executor 'nope'; known: local, ray"):
        harness.make_executor("nope")


def test_the_local_executor_needs_no_ray(registry: Path, tmp_path: Path) -> None:
    """A local run never imports Ray: the core runs with Ray unimportable."""
    args = ["harness", "run", "--registry", str(registry), "-r", "bm25", "-d", "sample", "--format", "json"]
    script = f"import sys; sys.modules['ray'] = None\nfrom harness.cli import main\nsys.argv = {args!r}\nmain()\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)[0]["row"]["hardware"]["executor"] is None


# -- identical results ---------------------------------------------------------------------
def test_large_items_and_results_cross_at_once(ray_executor: RayExecutor) -> None:
    """Items and results larger than a pipe's buffer, in flight both ways at the same time."""
    items = [chr(97 + i) * 3_000_000 for i in range(6)]
    upper = functools.partial(functools.partial, str.upper)  # picklable by reference, in every process
    results = dict(ray_executor.map(upper, items, description="large"))
    assert [results[i] for i in range(6)] == [item.upper() for item in items]


@pytest.mark.slow
@pytest.mark.parametrize("retriever", ["bm25", "dense", "smollm2-rerank"])
def test_ray_gives_the_local_run_byte_for_byte(
    retriever: str, registry: Path, ray_executor: RayExecutor, tmp_path: Path
) -> None:
    local = _run(registry, retriever, tmp_path / "local")
    with pytest.MonkeyPatch.context() as patch:
        if retriever == "dense":  # documents and queries are encoded on the workers, never here

            def here(*args: Any, **kwargs: Any) -> None:
                raise AssertionError("the driver encoded")

            patch.setattr(LocalEncoder, "encode", here)
        remote = _run(registry, retriever, tmp_path / "ray", ray_executor)
    assert remote.row.config_hash == local.row.config_hash  # the executor is no part of the configuration
    assert (remote.run_dir / "run.trec").read_bytes() == (local.run_dir / "run.trec").read_bytes()
    assert _metrics(remote.run_dir) == _metrics(local.run_dir)
    assert remote.row.metrics == local.row.metrics
    _logged_once(remote.run_dir, local.row.num_queries)
    executor = remote.row.hardware.executor
    assert executor is not None and executor["name"] == "ray" and executor["cluster"]["cpus"] == 2
    assert local.row.hardware.executor is None
    if retriever == "dense":  # the workers encoded the documents; the driver cached them, as a local run does
        cached = sorted(p.name for p in (tmp_path / "ray" / "cache" / "embeddings").rglob("vectors-*.npy"))
        assert cached == sorted(p.name for p in (tmp_path / "local" / "cache" / "embeddings").rglob("vectors-*.npy"))
    if retriever == "smollm2-rerank":  # the workers' LLM calls, summed
        for key in ("calls", "input_tokens", "output_tokens"):
            assert remote.row.usage[key] == local.row.usage[key] > 0, key


# -- a worker killed mid-shard ---------------------------------------------------------------
MARKED = '''
"""BM25 that marks each search with its process id (for the test to find a worker to kill) and,
while the gate file exists, waits for it to go: the kill lands mid-shard however slow the machine."""
import os
import time
import uuid
from pathlib import Path

import harness

MARKS = Path(__file__).with_name("marks")
GATE = Path(__file__).with_name("gate")


class Marked(harness.Retriever):
    name = "marked"

    def uses(self):
        return ["bm25"]

    def build(self, skb, context):
        self.inner = context.retriever("bm25")

    def search(self, queries, k, top_ranked=None):
        MARKS.mkdir(exist_ok=True)
        (MARKS / f"{os.getpid()}-{uuid.uuid4().hex}").write_text(",".join(str(q.id) for q in queries))
        deadline = time.monotonic() + 600
        while GATE.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.inner.search(queries, k)


@harness.hookimpl
def register_retrievers(register):
    register(Marked)
'''


@pytest.mark.slow
def test_a_worker_killed_mid_run_loses_nothing_and_counts_nothing_twice(
    registry: Path, cluster: str, ray_executor: RayExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Waits on what happens (a mark, then the kill), never on a time: passes on a loaded machine."""
    ray_executor.close()  # its workers hold the cluster's 2 CPUs; this test's executor needs them
    plugins_dir = tmp_path / "plugins"
    plugins_dir.mkdir()
    (plugins_dir / "marked.py").write_text(MARKED)
    monkeypatch.setenv("HARNESS_PLUGINS_DIR", str(plugins_dir))  # here, and forwarded to the workers
    marks, gate = plugins_dir / "marks", plugins_dir / "gate"
    local = _run(registry, "marked", tmp_path / "local")
    for mark in marks.iterdir():
        mark.unlink()

    killed: list[int] = []
    done = threading.Event()

    def kill_the_first_searching_worker() -> None:
        # the first worker to mark waits at the gate: killed there, then the gate opens for all
        while not done.wait(0.02):
            for mark in marks.glob("*-*") if marks.exists() else []:
                pid = int(mark.name.split("-")[0])
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                gate.unlink()
                return

    gate.touch()
    killer = threading.Thread(target=kill_the_first_searching_worker)
    killer.start()
    try:
        with RayExecutor(address=cluster, worker_start_timeout=WORKER_START, connect_timeout=WORKER_START) as executor:
            remote = _run(registry, "marked", tmp_path / "ray", executor)
    finally:
        done.set()
        killer.join()
    assert killed, "no worker searched"
    searches = [mark.read_text() for mark in marks.iterdir()]
    pids = {int(mark.name.split("-")[0]) for mark in marks.iterdir()}
    assert len(searches) == QUERIES // 2 + 1  # 3 shards of 2 queries, the killed one searched again
    assert len(pids) == 3  # two workers, and the one Ray started in the killed one's place
    assert (remote.run_dir / "run.trec").read_bytes() == (local.run_dir / "run.trec").read_bytes()
    assert _metrics(remote.run_dir) == _metrics(local.run_dir)
    _logged_once(remote.run_dir, QUERIES)
    assert any("1 Ray worker(s) died mid-shard" in note for note in remote.notes), remote.notes


# -- loopback only -------------------------------------------------------------------------------
def test_the_cluster_its_workers_and_the_driver_listen_on_loopback_only(
    cluster: str, ray_executor: RayExecutor
) -> None:
    """Ray's defaults listen on every interface; a cluster the tests start (and the driver and
    workers on it) must not be reachable from the network."""
    upper = functools.partial(functools.partial, str.upper)
    assert dict(ray_executor.map(upper, ["a", "b"], description="probe")) == {0: "A", 1: "B"}  # workers up
    assert cluster.startswith("127.0.0.1:")
    sockets = listening([*cluster_processes(cluster), psutil.Process(ray_executor._process.pid)])
    names = {name for _, _, name in sockets}
    assert {"gcs_server", "raylet"} <= names and any("Worker" in name for name in names), sockets

    def loopback(ip: str) -> bool:
        address = ipaddress.ip_address(ip.split("%")[0])
        mapped = getattr(address, "ipv4_mapped", None)
        return (mapped or address).is_loopback

    assert [s for s in sockets if not loopback(s[0])] == []


# -- API embeddings: one bound on requests in flight for the whole cluster ---------------------
class Embeddings(JSONHandler):
    """OpenAI's embeddings API: bag-of-words vectors, 0.5 s per request, requests in flight counted."""

    lock = threading.Lock()
    in_flight = most = requests = 0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.requests += 1
            cls.most = max(cls.most, cls.in_flight)
        time.sleep(0.5)
        data = [{"object": "embedding", "index": i, "embedding": _bag(t)} for i, t in enumerate(body["input"])]
        tokens = sum(len(t.split()) for t in body["input"])
        with cls.lock:
            cls.in_flight -= 1
        self.send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )


def _bag(text: str, dimension: int = 32) -> list[float]:
    vector = np.zeros(dimension)
    for word in re.findall(r"[a-z]+", text.lower()):
        vector[sum(map(ord, word)) % dimension] += 1.0
    return (vector / (np.linalg.norm(vector) or 1)).tolist()


@pytest.mark.slow
def test_api_embeddings_hold_one_limit_across_the_cluster(
    registry: Path, ray_executor: RayExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``concurrency: 1`` means one request in flight across both workers (their search shards
    encode queries at once), and the run, its requests and its tokens are the local run's."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    handler = type("Server", (Embeddings,), {"lock": threading.Lock()})
    with serve(handler) as url:
        served = tmp_path / "registry.yaml"
        served.write_text(registry.read_text().replace("BASE_URL", f"'{url}/v1'"))
        local = _run(served, "api-dense", tmp_path / "local")
        local_requests, handler.requests, handler.most = handler.requests, 0, 0
        remote = _run(served, "api-dense", tmp_path / "ray", ray_executor)
        most, handler.most = handler.most, 0
        # the same with two slots: the workers did ask at once (one slot above was a bound, not idleness)
        served.write_text(served.read_text().replace("concurrency: 1", "concurrency: 2"))
        _run(served, "api-dense", tmp_path / "ray2", ray_executor)
    assert most == 1 and handler.most == 2 and handler.requests == 2 * local_requests
    assert (remote.run_dir / "run.trec").read_bytes() == (local.run_dir / "run.trec").read_bytes()
    assert remote.row.usage["tokens"] == local.row.usage["tokens"] > 0
    assert remote.row.usage["requests"] == local.row.usage["requests"] == local_requests


# -- query synthesis: the LLM stages' calls on the workers ---------------------------------------
SCRIPTED_LLM = '''
"""A deterministic LLM provider that marks each call with its process id."""
import os
from pathlib import Path

import harness
from harness_llm.api import LLM, Completion

MARKS = Path(__file__).with_name("llm-marks")


class Scripted(LLM):
    name = "scripted"

    def complete(self, prompt, max_tokens=256, temperature=0.0):
        MARKS.mkdir(exist_ok=True)
        with open(MARKS / str(os.getpid()), "a") as handle:
            handle.write("x")
        text = prompt[-1].content
        if "short properties" in text:
            answer = "1. free software\\n2. command line\\n"
        elif text.startswith("Write one search request"):
            answer = "Request: " + text.split("asking for: ")[1].split(" It must")[0]
        elif text.startswith("Rewrite this search request"):
            answer = "I work in a terminal all day. " + text.split("\\n\\n")[1]
        else:
            answer = "Yes." if "command" in text.split("Does this")[0].lower() else "No"
        return Completion(answer, len(text.split()), len(answer.split()), 0.0)


@harness.hookimpl
def register_llms(register):
    register(Scripted)
'''


def test_synthesis_on_ray_writes_the_local_query_set(
    cluster: str, ray_executor: RayExecutor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``harness synthesize --executor ray``: every LLM call of the three LLM stages runs on the
    workers, and the query set and its provenance are the local run's, byte for byte."""
    ray_executor.close()  # the command's executor needs the cluster's CPUs
    plugins_dir = tmp_path / "plugins"
    plugins_dir.mkdir()
    (plugins_dir / "scripted_llm.py").write_text(SCRIPTED_LLM)
    monkeypatch.setenv("HARNESS_PLUGINS_DIR", str(plugins_dir))  # here, and forwarded to the workers
    marks = plugins_dir / "llm-marks"
    args = ["synthesize", "-d", "debian", "--n", "6", "--llm", "scripted:m", "--max-candidates", "8", "--seed", "3"]
    outputs, calls = [], []
    for name, where in (("local", []), ("ray", ["--executor", "ray", "--address", cluster])):
        installed_plugins()
        result = invoke(*args, *where, "--out", str(tmp_path / name), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        root = tmp_path / name / "qa" / "debian"
        outputs.append([(root / f).read_bytes() for f in ("stark_qa/stark_qa.csv", "provenance.jsonl")])
        calls.append({int(mark.name): len(mark.read_text()) for mark in marks.iterdir()})
        for mark in marks.iterdir():
            mark.unlink()
    assert outputs[0] == outputs[1] and outputs[0][0].count(b"\n") > 2
    assert list(calls[0]) == [os.getpid()] and os.getpid() not in calls[1]  # asked on the workers
    assert sum(calls[1].values()) == sum(calls[0].values()) > 6
    refused = invoke(*args, "--address", cluster, "--out", str(tmp_path / "x"))
    assert refused.exit_code != 0 and "--address: for --executor ray" in refused.output
