"""Searching a run's pending queries, batch by batch, here or in shards on an executor's workers:
every batch's rankings are checked and cleaned, then appended to the resume log as they come."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.errors import HarnessError
from harness.executors import Executor
from harness.queries import Query
from harness.retriever import ProgressTask, Retriever
from harness.run.build import Builder, search_batch
from harness.run.checks import add_usage, check_rankings, clean_ranking
from harness.run.resolve import RunSpec
from harness.run.secrets import redacted
from harness.run.shards import ShardSearch, shard_size

#: the resume log is synced to disk at most this often (and at the end)
_SYNC_SECONDS = 10.0


@dataclass
class Search:
    """The search phase of one run. ``remote_usage``: what the executor's workers spent so far
    (read even when the search fails, so that the row's usage keeps it)."""

    spec: RunSpec
    builder: Builder
    executor: Executor
    batch_size: int | None
    #: how the user resumes ("run the same command again"), for messages
    again: str
    #: the SKB's fingerprint: search workers must load the same one
    fingerprint: str = ""
    remote_usage: dict[str, Any] = field(default_factory=dict)

    def run(
        self,
        retriever: Retriever,
        pending: list[Query],
        results_path: Path,
        is_candidate: np.ndarray,
        task: ProgressTask,
    ) -> dict[int, dict[str, Any]]:
        """Search ``pending`` in batches, here or in shards on the executor's workers; check,
        clean and append each batch's results to the log here as it completes; return them. A
        query already logged (a shard Ray ran again after its worker died) is never logged twice."""
        spec, batch_size = self.spec, self.batch_size or retriever.batch_size
        then = f" Completed queries are kept in {results_path}; {self.again} to resume."
        where = self._here if self.executor.local else self._on_workers
        found: dict[int, dict[str, Any]] = {}
        dropped = self.builder.dropped.setdefault(spec.retriever, {"non-candidate": 0, "repeated": 0})
        synced = time.monotonic()
        with results_path.open("a", encoding="utf-8") as log:
            try:
                for batch, rankings, seconds in where(retriever, pending, batch_size, then):
                    rankings = check_rankings(spec.retriever, batch, rankings, spec.k)
                    per_query_ms = 1000 * seconds / len(batch)
                    for query, ranking in zip(batch, rankings, strict=True):
                        if query.id in found:
                            # delivered twice (a shard run again): logged and counted once; another ranking
                            # of it is refused, as in the resume log, never one of the two silently kept
                            again = clean_ranking(spec.retriever, query, ranking, is_candidate, {**dropped})
                            _same_ranking(found[query.id], record_of(query, again.top(spec.k), 0, 0), results_path)
                            continue
                        ranking = clean_ranking(spec.retriever, query, ranking, is_candidate, dropped).top(spec.k)
                        record = record_of(query, ranking, per_query_ms, len(batch))
                        log.write(json.dumps(record) + "\n")
                        found[query.id] = record
                    # Flushed per batch: a killed process loses no finished query. Synced to disk at
                    # most every few seconds and at the end: a power loss costs a few seconds' work.
                    log.flush()
                    if time.monotonic() - synced > _SYNC_SECONDS:
                        os.fsync(log.fileno())
                        synced = time.monotonic()
                    task.advance(len(batch))
            finally:
                log.flush()
                os.fsync(log.fileno())
        return found

    def _here(
        self, retriever: Retriever, pending: list[Query], batch_size: int, then: str
    ) -> Iterator[tuple[list[Query], list[Any], float]]:
        """(batch, rankings as returned, seconds) of each batch, searched in this process."""
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            began = time.perf_counter()
            rankings = search_batch(self.spec, retriever, batch, then)
            yield batch, rankings, time.perf_counter() - began

    def _on_workers(
        self, retriever: Retriever, pending: list[Query], batch_size: int, then: str
    ) -> Iterator[tuple[list[Query], list[Any], float]]:
        """The same, searched by the executor's workers: shards of whole batches go out, each
        worker holding the retriever built once; batches come back as their shard completes,
        with what the worker spent (tokens, cost) and dropped (the rankings of what it uses)."""
        spec = self.spec
        size = shard_size(len(pending), batch_size)
        shards = [pending[start : start + size] for start in range(0, len(pending), size)]
        factory = ShardSearch.of(
            spec,
            self.builder.plans,
            self.builder.cache_dir,
            self.builder.device,
            batch_size,
            self.executor.worker_executor(),
            self.fingerprint,
        )
        try:
            for index, result in self.executor.map(factory, shards, description=f"search {spec.retriever}"):
                self.remote_usage = add_usage(self.remote_usage, result["usage"])
                for name, counts in result["dropped"].items():
                    total = self.builder.dropped.setdefault(name, {"non-candidate": 0, "repeated": 0})
                    for what, count in counts.items():
                        total[what] = total.get(what, 0) + count
                position = 0
                for count, rankings, seconds in result["batches"]:
                    yield shards[index][position : position + count], rankings, seconds
                    position += count
        except HarnessError as exc:
            raise HarnessError(f"{str(exc).rstrip('.')}.{then}") from exc


def _same_ranking(logged: dict[str, Any], again: dict[str, Any], results_path: Path) -> None:
    """Refuse a second, different ranking of a query already logged this session (the time it
    took may differ: a shard run again is timed again)."""
    if any(logged.get(key) != again.get(key) for key in ("ids", "scores", "details")):
        raise HarnessError(
            f"query {logged['qid']} came back twice from the executor's workers with different rankings (a shard "
            f"run again by a nondeterministic retriever?); the first is kept in {results_path}, and which one the "
            "run should use cannot be decided: run the same command again to resume from the log"
        )


def record_of(query: Query, ranking: Any, per_query_ms: float, batch_size: int) -> dict[str, Any]:
    """One resume-log line."""
    record = {
        "qid": query.id,
        "ids": ranking.ids.tolist(),
        # full precision: rounding would turn distinct scores into ties
        "scores": ranking.scores.tolist(),
        "latency_ms": per_query_ms,
        "batch_size": batch_size,
    }
    if ranking.details is not None:
        record["details"] = redacted(ranking.details)  # a URL a retriever reports loses its credentials
    return record
