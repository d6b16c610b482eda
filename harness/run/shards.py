"""Searching a run's queries in shards on an executor's workers (``--executor ray``).

Each worker holds the run's retriever built once, on the worker, exactly as the driver built it:
the same plugin classes and parameters, ``build()`` on the SKB loaded there, after the driver's
own build filled the caches (so the worker's build reads them). Composites (a reranker over its
first stage, hybrid fusion) are built whole. A shard is searched in the run's batches, and the
rankings go back unchecked: the driver checks and cleans them, appends them to the resume log
and scores them with the same single-process code as a local run.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.io import atomic_write, exclusive
from harness.plugins import PluginManager, get_plugin_manager, using
from harness.queries import Query
from harness.run.build import Builder, search_batch
from harness.run.checks import subtract_usage
from harness.run.resolve import RunSpec, construct

#: batches per shard at most: a shard is what a killed worker loses and what progress shows
_MAX_BATCHES = 4
#: shards wanted per run at least (so that every worker of a cluster has some)
_MIN_SHARDS = 64


def shard_size(pending: int, batch_size: int) -> int:
    """Queries per shard: whole batches (a worker searches the batches a local run would, so
    results that depend on a batch's company come out the same), 1 to 4 of them."""
    batches = -(-pending // batch_size)
    return batch_size * max(1, min(_MAX_BATCHES, -(-batches // _MIN_SHARDS)))


def cache_token(cache_dir: Path) -> str:
    """A token naming this cache directory, written into it once: a worker that does not find
    the same token does not share the driver's cache."""
    found = _read_token(Path(cache_dir))
    if found:
        return found
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    with exclusive(Path(cache_dir) / ".harness-cache-id.lock"):  # two drivers write one token
        found = _read_token(Path(cache_dir))
        if not found:
            found = secrets.token_hex(16)
            with atomic_write(Path(cache_dir) / ".harness-cache-id") as handle:
                handle.write(found)
    return found


@dataclass
class ShardSearch:
    """The factory of a search worker: what it takes to build the run's retriever on a worker
    (picklable: names, parameters, paths)."""

    retriever: str
    #: every retriever of the spec: name → (plugin, the parameters that run), in the spec's order
    retrievers: dict[str, tuple[str, dict[str, Any]]]
    dataset: tuple[str, str, dict[str, Any]]
    split: str
    k: int
    plans: dict[str, Any]
    cache_dir: str
    cache_token: str
    device: str
    batch_size: int
    #: what the worker's builds get as ``context.executor`` (the cluster's limiters)
    executor: Any
    #: the driver's SKB fingerprint and what its build resolved (``Runner._provenance``): a
    #: worker that loads or builds anything else (other files, another model commit) refuses
    fingerprint: str = ""
    provenance: dict[str, Any] | None = None

    @classmethod
    def of(
        cls,
        spec: RunSpec,
        plans: dict[str, Any],
        cache_dir: Path,
        device: str,
        batch_size: int,
        executor: Any,
        fingerprint: str,
    ) -> ShardSearch:
        data = spec.dataset_component.info
        return cls(
            retriever=spec.retriever,
            retrievers={name: (c.info.plugin, c.info.runtime_params) for name, c in spec.retrievers.items()},
            dataset=(spec.dataset, data.plugin, data.runtime_params),
            split=spec.split,
            k=spec.k,
            plans=plans,
            cache_dir=str(cache_dir),
            cache_token=cache_token(cache_dir),
            device=device,
            batch_size=batch_size,
            executor=executor,
            fingerprint=fingerprint,
            provenance=Builder.provenance(spec),
        )

    def __call__(self) -> ShardSearcher:
        found = _read_token(Path(self.cache_dir))
        if found != self.cache_token:
            raise HarnessError(
                f"the cache directory {self.cache_dir} is not the driver's on this worker (host "
                f"{os.uname().nodename}): put HARNESS_CACHE on a filesystem every node of the cluster shares"
            )
        # this process is the worker's own: what plugins cache (the SKB, LLM answers) goes where the driver's did
        os.environ["HARNESS_CACHE"] = self.cache_dir
        plugins = get_plugin_manager()
        with using(plugins):
            retrievers = {
                name: construct(plugins, "retriever", name, plugin, dict(params))
                for name, (plugin, params) in self.retrievers.items()
            }
            name, plugin, params = self.dataset
            dataset = construct(plugins, "dataset", name, plugin, dict(params))
        spec = RunSpec(
            retriever=self.retriever,
            retrievers=retrievers,
            dataset=name,
            dataset_component=dataset,
            split=self.split,
            k=self.k,
            metrics=[],
        )
        builder = Builder(
            Path(self.cache_dir),
            device=self.device,
            executor=self.executor,
            allow_training=False,
            plans=dict(self.plans),
        )
        host = os.uname().nodename
        with using(plugins):
            skb = dataset.instance.load_skb()
            if skb.fingerprint != self.fingerprint:
                raise HarnessError(
                    f"the worker on host {host} loaded another SKB than the driver (fingerprint {skb.fingerprint[:12]} "
                    f"≠ {self.fingerprint[:12]}): give every node of the cluster the same dataset files"
                )
            builder.build_all(spec, skb, dataset.instance)
        built = Builder.provenance(spec)
        if self.provenance is not None and built != self.provenance:
            raise HarnessError(
                f"the worker on host {host} built {spec.retriever!r} from other inputs than the driver "
                f"({built} ≠ {self.provenance}): install the same plugins and models on every node"
            )
        return ShardSearcher(spec, builder, self.batch_size, plugins)


def _read_token(cache_dir: Path) -> str | None:
    try:
        return (cache_dir / ".harness-cache-id").read_text(encoding="utf-8").strip()
    except OSError:
        return None


class ShardSearcher:
    """A built retriever on a worker; ``searcher(queries)`` searches one shard."""

    def __init__(self, spec: RunSpec, builder: Builder, batch_size: int, plugins: PluginManager) -> None:
        self.spec, self.builder, self.batch_size, self.plugins = spec, builder, batch_size, plugins

    def __call__(self, queries: list[Query]) -> dict[str, Any]:
        """``batches``: (queries, rankings as returned, seconds) per batch; ``usage``: what the
        shard spent (tokens, cost; keys as the runner's); ``dropped``: ids the rankings of the
        retrievers a composite uses lost to the checks, by retriever (the driver checks the main one)."""
        spec = self.spec
        retriever: Any = spec.main.instance
        before = Builder.usage(spec)
        dropped_before = {name: dict(counts) for name, counts in self.builder.dropped.items()}
        batches = []
        with using(self.plugins):
            for start in range(0, len(queries), self.batch_size):
                batch = queries[start : start + self.batch_size]
                began = time.perf_counter()
                rankings = search_batch(spec, retriever, batch)
                batches.append((len(batch), rankings, time.perf_counter() - began))
        dropped = {
            name: {what: count - dropped_before.get(name, {}).get(what, 0) for what, count in counts.items()}
            for name, counts in self.builder.dropped.items()
        }
        return {"batches": batches, "usage": subtract_usage(Builder.usage(spec), before), "dropped": dropped}
