"""The retriever interface.

A retriever is built once from an SKB (``build``: indexing, encoding; the runner times it),
then asked for the top-k of a batch of queries at a time (``search``). Composition has one
mechanism: a retriever names the retrievers it builds on in ``uses()`` and gets them, built on
the same SKB, from ``context.retriever(name)``. Hybrid fusion does this; so does a
:class:`Reranker`, whose first stage is just the retriever it uses.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from harness.executors import Executor, LocalExecutor
from harness.io import write_json
from harness.options import Options, parse_options
from harness.queries import Query
from harness.skb import SKB

Regime = Literal["zero-shot", "trained", "llm-at-query-time"]


@dataclass(frozen=True)
class HealthCheck:
    """A retriever's own idea at work, stated as a counter that must not (almost) stay at zero.

    The runner sums the per-query counters of :meth:`Retriever.health` into the row's ``health``;
    a check fails (and the row is flagged, with ``what`` in the reason) when ``counter`` summed is
    below ``at_least`` times the denominator: the number of queries, or the counter ``per``.
    """

    counter: str
    what: str  # what the counter counts, said to a reader: "a structured query executed"
    at_least: float = 0.05
    per: str | None = None  # another counter as the denominator (verdicts, scored candidates)


@dataclass
class Ranking:
    """Node ids, best first, and their scores (higher is better).

    ``details``: optional per-query diagnostics (JSON values: linked entities, a chosen path, a
    parse, an execution result); the runner keeps them in the resume log and ``per_query.jsonl``
    so a researcher can see why a query failed."""

    ids: np.ndarray
    scores: np.ndarray
    details: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids).reshape(-1)
        if ids.dtype.kind not in "iu":
            # a cast would turn 12.7 into node 12: only whole numbers are node ids
            whole = ids.dtype.kind == "f" and bool(np.all(np.isfinite(ids) & (ids == np.round(ids))))
            if len(ids) and not whole:
                bad = next(v for v in ids.tolist() if not (isinstance(v, float) and np.isfinite(v) and v == round(v)))
                raise ValueError(f"ranking ids must be integer node ids, got {bad!r}")
        self.ids = ids.astype(np.int64)
        self.scores = np.asarray(self.scores, dtype=np.float64).reshape(-1)
        if len(self.ids) != len(self.scores):
            raise ValueError(f"ranking has {len(self.ids)} ids but {len(self.scores)} scores")

    def top(self, k: int) -> Ranking:
        return Ranking(self.ids[:k], self.scores[:k], self.details)


ProgressFactory = Callable[[str, int | None], "ProgressTask"]


class ProgressTask:
    """A handle to advance one progress bar; the no-op default keeps plugins UI-agnostic."""

    def advance(self, amount: int = 1) -> None:
        """Mark ``amount`` more units done."""

    def end(self, ok: bool = True) -> None:
        """Take the bar off the display: done, or failed when ``ok`` is false."""


@dataclass
class BuildContext:
    """What the runner hands a retriever at build time.

    Attributes:
        cache_dir: a directory the retriever may keep caches in (indexes, embeddings);
            key file names by content (``harness.stable_hash``; ``harness.caches`` verifies entries).
        device: "cpu" or "cuda" (already resolved from ``--device auto``).
        progress: ``progress(description, total)`` returns a task to ``advance()``.
        build_retriever: builds another retriever by registry or plugin name on the same SKB
            (for composites such as hybrid fusion; see ``Retriever.uses``).
        executor: where heavy work may run (``executor.map``: document encoding in shards).
            When it is not ``local`` (``--executor ray``), this build is the driver's: it fills
            the caches, and the workers build again from them and do the searching, so a
            retriever need not prepare to search here (warm-ups, moving matrices to a GPU).
        devices: devices to encode documents on at once in this process (``--devices
            cuda:0,cuda:1``), or empty for ``device`` alone.
    """

    cache_dir: Path
    device: str = "cpu"
    progress: ProgressFactory = field(default=lambda description, total: ProgressTask())
    build_retriever: Callable[[str], Retriever] | None = None
    executor: Executor = field(default_factory=LocalExecutor)
    devices: tuple[str, ...] = ()

    def retriever(self, name: str) -> Retriever:
        """Another retriever, built on the same SKB (it must be listed by ``uses()``)."""
        if self.build_retriever is None:
            raise RuntimeError("this context cannot build other retrievers")
        return self.build_retriever(name)

    @contextmanager
    def task(self, description: str, total: int | None = None) -> Iterator[ProgressTask]:
        """A progress bar (a spinner without ``total``) for the block; it ends with the block."""
        handle = self.progress(description, total)
        ok = False
        try:
            yield handle
            ok = True
        finally:
            end = getattr(handle, "end", None)  # a factory of an older shape may hand out tasks without it
            if end is not None:
                end(ok)

    def track(self, items: Iterable[Any], description: str, total: int | None = None) -> Iterator[Any]:
        """Iterate ``items`` while advancing a progress bar."""
        task = self.progress(description, total)
        for item in items:
            yield item
            task.advance()


@dataclass
class TrainContext(BuildContext):
    """What ``fit`` receives besides the SKB and the training queries.

    Attributes:
        validation: queries for early stopping and model selection (may be empty).
        seed: the seed (Python, NumPy and PyTorch are seeded with it before ``fit``).
        checkpoint_dir: write the trained model here; :meth:`Retriever.load_checkpoint`
            reads it back. It becomes the cache entry when ``fit`` returns.
        work_dir: kept across a kill: epoch checkpoints go here (:class:`harness.EpochLoop`
            keeps them), so ``fit`` resumes from the last one (removed once the checkpoint is stored).
    """

    validation: Sequence[Query] = ()
    seed: int = 0
    checkpoint_dir: Path = Path()
    work_dir: Path = Path()
    _curve: list[dict[str, Any]] = field(default_factory=list)
    _subset: list[Query] | None = None

    def trains_on(self, queries: Sequence[Query]) -> None:
        """Say that ``fit`` trains on these queries of the split only (a sample, say): the row
        records their number and digest next to the split's."""
        self._subset = list(queries)

    def log(self, **values: float | int) -> None:
        """Record a point of the training curve (``epoch=1, loss=0.42, val_mrr=0.31``)."""
        point = {key: (float(v) if isinstance(v, float) else int(v)) for key, v in values.items()}
        self._curve.append(point)
        with open(self.work_dir / "curve.jsonl", "a", encoding="utf-8") as handle:
            handle.write(json.dumps(point) + "\n")

    def report(self, epochs: int, examples: int, prepare_seconds: float, train_seconds: float, **extra: Any) -> None:
        """Record what this attempt trained, in ``checkpoint_dir/fit.json`` (what
        ``bench/bench_training.py`` reads for throughput): ``epochs`` run now (a resumed attempt
        counts its own), ``examples`` per epoch, the seconds preparing (mining, encoding, …)
        and training; ``extra``: anything else worth keeping beside the checkpoint."""
        seconds = {"prepare": round(prepare_seconds, 3), "train": round(train_seconds, 3)}
        fit = {"epochs": epochs, "examples": examples, **extra, "seconds": seconds}
        write_json(self.checkpoint_dir / "fit.json", fit)

    def curve(self) -> list[dict[str, Any]]:
        """The points logged so far, those of an interrupted earlier attempt included."""
        path = self.work_dir / "curve.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Retriever(ABC):
    """Base class for retrievers. Subclass, set ``name``, declare ``Options``, implement
    ``build`` and ``search``.

    Class attributes:
        name: the name users type (``--retriever NAME``) and registry entries refer to.
        version: bump when a change alters results; it goes into leaderboard rows.
        regime: "zero-shot", "trained" (``fit`` is called with the train split first),
            or "llm-at-query-time".
        batch_size: how many queries ``search`` receives at once by default.
        reranks: whether ``search`` honours ``top_ranked`` (scores only the given candidates);
            the harness refuses to hand ``top_ranked`` to a retriever that does not.
        Options: the parameters (a :class:`harness.Options` model); the constructor validates
            its keyword arguments against it into ``self.options``.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "0"
    regime: ClassVar[Regime] = "zero-shot"
    batch_size: ClassVar[int] = 64
    reranks: ClassVar[bool] = False
    #: a trained retriever's parameters that change only how it searches (a generator, a
    #: candidate depth), not what ``fit`` learns: left out of the checkpoint key, so one trained
    #: model serves every value of them
    search_params: ClassVar[tuple[str, ...]] = ()
    Options: ClassVar[type[Options]] = Options

    def __init__(self, **params: Any) -> None:
        self.options = parse_options(type(self).Options, params, f"retriever {getattr(self, 'name', '?')!r}")

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter with the value that runs (JSON types): what rows record and hash."""
        return self.options.model_dump(mode="json")

    def fit(self, skb: SKB, train: Sequence[Query], context: TrainContext) -> None:  # noqa: B027
        """Train on ``train`` (called only when ``regime == "trained"`` and no checkpoint of
        this training exists). ``context`` is a :class:`harness.TrainContext`: write the model to
        ``context.checkpoint_dir``, epoch checkpoints to ``context.work_dir`` (resume from the
        last one), the curve through ``context.log(epoch=…, loss=…)``; ``context.validation``
        holds the queries for early stopping. ``build`` follows, after ``load_checkpoint``."""

    def load_checkpoint(self, path: Path) -> None:  # noqa: B027
        """Load what ``fit`` wrote (now the verified cache entry ``path``) before ``build``."""

    def training_identity(self) -> dict[str, Any]:
        """What determines training besides the parameters, the SKB, the queries and the seed,
        as JSON values: the base model's weights digest (a path or hub id names, not identifies,
        weights). Part of the checkpoint's key."""
        return {}

    @abstractmethod
    def build(self, skb: SKB, context: BuildContext) -> None:
        """Prepare to search ``skb``'s candidates (index, encode); may use caches."""

    @abstractmethod
    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        """Return, for each query in order, at most ``k`` candidate ids with scores, best first.

        ``top_ranked``, when given, holds a ranking per query to reorder instead of searching
        every candidate (mteb's convention). Only retrievers with ``reranks = True`` receive it;
        the others may ignore the argument.
        """

    def usage(self) -> dict[str, Any]:
        """Resources spent so far (tokens, cost in USD, API calls); recorded in the row."""
        return {}

    def provenance(self) -> dict[str, Any]:
        """What building resolved that the parameters do not say (JSON types): the commit a hub
        id's branch pointed to, the digest of a file downloaded by URL. The runner asks after
        ``build`` and records it in the row beside the parameters, outside the configuration
        hash; it refuses to resume a run whose provenance changed (a branch moved), since the
        queries answered before would come from another model."""
        return {}

    def uses(self) -> list[str]:
        """Names of other retrievers this one builds through ``context.retriever(name)``;
        their configurations become part of this run's configuration."""
        return []

    @classmethod
    def health(cls, details: dict[str, Any] | None) -> dict[str, float]:
        """The counters that show this retriever's own idea at work in one query, read from the
        ``details`` of its ranking (parses executed, fallbacks taken, verdicts by value). A class
        method on the recorded details alone, so ``harness leaderboard validate`` recomputes
        them from a row's per-query results without building anything."""
        return {}

    @classmethod
    def health_checks(cls, params: dict[str, Any]) -> list[HealthCheck]:
        """The counters (see :meth:`health`) whose (near) absence means the row does not measure
        what its name says; ``params`` are the row's parameters (a source switched off is not
        checked)."""
        return []


#: the key of a reranked ranking's details that holds its first stage's ids, in order
FIRST_STAGE = "first_stage"


class Reranker(Retriever):
    """A retriever that reorders the top ``candidates`` of the retriever it uses (``first_stage``).

    Implement ``rerank``. ``search`` asks the first stage for its candidates (already checked
    by the runner: valid, sorted, candidates only), unless ``top_ranked`` supplies them. If you
    override ``build``, call ``super().build(skb, context)`` first.
    """

    reranks = True
    #: True when its rankings go on past the reranked candidates, in the first stage's order, up
    #: to ``k``: cut-offs deeper than ``candidates`` are then measured, not left out
    fills = False

    class Options(Options):
        first_stage: str = Field(description="the retriever whose results are reranked (registry entry or plugin)")
        candidates: int = Field(20, gt=0, description="how many of the first stage's results to rerank")

    # `self.options` stays typed as harness.Options: a reranker's Options need only have these two
    # fields, not subclass this class (harness-gnn's derives DocumentOptions), hence the ignores below

    def uses(self) -> list[str]:
        return [self.options.first_stage]  # type: ignore[attr-defined]

    def build(self, skb: SKB, context: BuildContext) -> None:
        self.first_stage = context.retriever(self.options.first_stage)  # type: ignore[attr-defined]

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        if top_ranked is None:
            top_ranked = self.first_stage.search(queries, self.options.candidates)  # type: ignore[attr-defined]
        return self.noting_first_stage(self.rerank(queries, top_ranked, k), top_ranked)

    @staticmethod
    def noting_first_stage(reranked: Sequence[Ranking], first_stage: Sequence[Ranking]) -> list[Ranking]:
        """``reranked`` with each first stage's ids in its details: the row then says whether
        reranking helped (a reranker that overrides ``search`` calls this itself)."""
        return [
            Ranking(r.ids, r.scores, {**(r.details or {}), FIRST_STAGE: [int(i) for i in first.ids]})
            for r, first in zip(reranked, first_stage, strict=True)
        ]

    @abstractmethod
    def rerank(self, queries: Sequence[Query], candidates: Sequence[Ranking], k: int) -> list[Ranking]:
        """Return, for each query, at most ``k`` of its candidates, re-scored and re-sorted."""
