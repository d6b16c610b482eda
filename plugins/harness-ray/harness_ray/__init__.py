"""The Ray executor for stark-harness (``--executor ray``).

``harness run ... --executor ray --address auto`` encodes documents, searches query shards and
asks LLM rerankers on the workers of a Ray cluster (``ray start --head`` starts one on this
machine); the harness merges what comes back into the same single-process scoring, resume log
and row as a local run. Importing this module imports no Ray: the executor talks to the
cluster from a driver process of its own (:mod:`harness_ray.driver`), so that a cluster that
dies mid-run is one clear error here rather than the end of the harness's process.
"""

from __future__ import annotations

import harness


@harness.hookimpl
def register_executors(register: harness.Register) -> None:
    register("harness_ray.executor:RayExecutor", name="ray")
