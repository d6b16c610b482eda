"""A testing kit for plugin authors: a tiny SKB, a tiny dataset (and one with train and val
splits for trained retrievers: ``dataset="tiny-train"``), and a contract test any retriever
can run.

::

    from harness.testing import check_retriever

    def test_my_retriever_keeps_the_contract(tmp_path):
        check_retriever(MyRetriever, {"depth": 5}, tmp_path)

``check_retriever`` runs the retriever through the real resolver and runner on the tiny
dataset (so composites get what they ``uses()``, and every check the runner makes applies),
then checks the contract: every ranking sorted best first, ids valid candidates without
repeats, at most ``k`` of them, and the same rankings from a second run that reads what the
first one cached.
``run_retriever`` makes one such run and returns its outcome (the row, its directory).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness.dataset import Dataset
from harness.plugins import PluginManager
from harness.plugins.hookspecs import hookimpl
from harness.queries import Query, QuerySet
from harness.retriever import Retriever
from harness.run.registry import Registry, RetrieverEntry
from harness.skb import SKB, EdgeType

__all__ = [
    "TinyDataset",
    "TinyTrainDataset",
    "check_retriever",
    "check_training_resumes",
    "checkpoint_entry",
    "plugin_manager",
    "run_retriever",
    "star_skb",
    "tiny_skb",
]


def tiny_skb() -> SKB:
    """Five products and two brands, shaped like real data: a multi-edge, a self-loop, a node
    without fields, unicode, a list-valued field. Products are the candidates."""
    names = ["red kettle", "blue kettle", "green teapot", "steel pan", "copper pot", "Acme", "Glöbex"]
    fields: list[dict[str, Any]] = [
        {"description": "an electric kettle in red, boils water fast", "tags": ["kitchen", "electric"]},
        {"description": "a blue stovetop kettle that whistles"},
        {"description": "a glass teapot for green tea — 茶"},
        {"description": "a steel frying pan"},
        {},
        {},
        {"country": "Deutschland"},
    ]
    src = np.array([0, 1, 2, 3, 4, 0, 0, 3])
    dst = np.array([5, 5, 6, 6, 6, 1, 1, 3])
    edge_type = np.array([0, 0, 0, 0, 0, 1, 1, 1])
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


def star_skb(leaves: int, chain: bool = True) -> SKB:
    """A hub brand (node 0) making ``leaves`` products (nodes 1…): one node of huge degree, to
    test that a retriever's graph work stays within its bounds. ``chain``: each product is also
    ``similar`` to the next (paths longer than one hop that avoid the hub)."""
    products = np.arange(1, leaves + 1)
    chained = products[:-1] if chain else products[:0]
    return SKB(
        name="star",
        node_type_names=["product", "brand"],
        node_types=np.array([1] + [0] * leaves),
        names=["hub", *(f"product {i}" for i in products)],
        fields=[{"country": "here"}, *({"description": f"thing {i}", "tags": ["a", "b"]} for i in products)],
        edge_types=[EdgeType("made_by", "made by", "makes")] + ([EdgeType("similar", "similar to")] if chain else []),
        src=np.concatenate([products, chained]),
        dst=np.concatenate([np.zeros(leaves, dtype=np.int64), chained + 1]),
        edge_type=np.concatenate([np.zeros(leaves, dtype=np.int64), np.ones(len(chained), dtype=np.int64)]),
        candidate_types=["product"],
    )


TINY_QUERIES: list[tuple[int, str, tuple[int, ...]]] = [
    (1, "red kettle that boils water", (0,)),
    (2, "kettle", (0, 1)),
    (3, "copper pot for soups", (4,)),
    (4, "glass teapot", (2,)),
    (5, "something by Glöbex", (2, 3, 4)),
    (6, "a brand", (5,)),  # answered only by a non-candidate
]


class TinyDataset(Dataset):
    """:func:`tiny_skb` with six queries in a ``test`` split and four in ``train``."""

    name = "tiny"

    def load_skb(self) -> SKB:
        return tiny_skb()

    def load_queries(self) -> QuerySet:
        queries = [Query(q, text, answers) for q, text, answers in TINY_QUERIES]
        return QuerySet("tiny", {"test": queries, "train": queries[:4]})

    def known_splits(self) -> list[str]:
        return self.load_queries().split_names  # in memory: as cheap as a declaration


TINY_TRAIN: list[tuple[int, str, tuple[int, ...]]] = [
    (101, "electric kettle", (0,)),
    (102, "whistling stovetop kettle", (1,)),
    (103, "teapot for tea", (2,)),
    (104, "frying pan made of steel", (3,)),
    (105, "a pot made of copper", (4,)),
    (106, "kettle from Acme", (0, 1)),
    (107, "Glöbex cookware", (2, 3, 4)),
    (108, "boil water quickly", (0,)),
]
TINY_VAL: list[tuple[int, str, tuple[int, ...]]] = [(201, "green tea pot", (2,)), (202, "pan for frying", (3,))]


class TinyTrainDataset(TinyDataset):
    """:func:`tiny_skb` for trained retrievers: ``train`` (eight queries), ``val`` (two) and
    ``test`` (the six of :class:`TinyDataset`), no query in two splits."""

    name = "tiny-train"

    def load_queries(self) -> QuerySet:
        def split(rows: list[tuple[int, str, tuple[int, ...]]]) -> list[Query]:
            return [Query(q, text, answers) for q, text, answers in rows]

        return QuerySet("tiny-train", {"train": split(TINY_TRAIN), "val": split(TINY_VAL), "test": split(TINY_QUERIES)})


class _TinyPlugin:
    @hookimpl
    def register_datasets(self, register: Any) -> None:
        register(TinyDataset)
        register(TinyTrainDataset)


class _Components:
    def __init__(self, retrievers: Sequence[type[Retriever]]) -> None:
        self.retrievers = list(retrievers)

    @hookimpl
    def register_retrievers(self, register: Any) -> None:
        for retriever in self.retrievers:
            register(retriever)


def plugin_manager(*plugins: object, entry_points: bool = False) -> PluginManager:
    """A plugin manager with the built-ins, the tiny dataset and ``plugins`` (modules or objects
    with ``@harness.hookimpl`` methods); installed plugins too when ``entry_points``."""
    manager = PluginManager(load_entry_points=entry_points)
    if not manager.pm.has_plugin("harness-testing-tiny"):
        manager.register(_TinyPlugin(), "harness-testing-tiny")
    for i, plugin in enumerate(plugins):
        manager.register(plugin, f"harness-testing-{i}")
    return manager


def run_retriever(
    retriever: type[Retriever],
    params: dict[str, Any] | None,
    tmp_path: str | os.PathLike[str],
    *,
    k: int = 3,
    also: Iterable[type[Retriever]] = (),
    presets: dict[str, dict[str, Any]] | None = None,
    plugins: Iterable[object] = (),
    dataset: str = "tiny",
    split: str = "test",
    metrics: Sequence[str] = ("hit@1", "mrr"),
    fresh: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    allow_training: bool = True,
    seed: int = 0,
) -> Any:
    """One run of ``retriever`` with ``params`` through the real resolver and runner; returns
    the outcome (``.row`` is the leaderboard row, ``.run_dir`` its directory, ``.notes`` what
    the runner healed). ``also`` registers retrievers it uses; ``presets`` adds registry
    entries by name (``{"first": {"plugin": "bm25", "params": {...}}}``); ``plugins`` registers
    further plugins (another dataset, say). Outputs live under ``tmp_path``, and so does the
    cache unless ``cache_dir`` is given. A trained retriever trains first (on ``tiny-train``'s
    train split), unless ``allow_training`` is false: then its checkpoint must be cached."""
    from harness.run.resolve import resolve
    from harness.run.runner import Runner

    tmp = Path(tmp_path)
    manager = plugin_manager(_Components([retriever, *also]), *plugins)
    entries = {"under-test": RetrieverEntry(plugin=retriever.name, params=dict(params or {}))}
    entries.update({name: RetrieverEntry(**entry) for name, entry in (presets or {}).items()})
    spec = resolve(Registry(retrievers=entries), manager, "under-test", dataset, split, k, list(metrics), seed=seed)
    runner = Runner(
        manager,
        output_dir=tmp / "runs",
        device="cpu",
        fresh=fresh,
        cache_dir=cache_dir or tmp / "cache",
        allow_training=allow_training,
    )
    return runner.run(spec)


def check_retriever(
    retriever: type[Retriever],
    params: dict[str, Any] | None,
    tmp_path: str | os.PathLike[str],
    **options: Any,
) -> list[dict[str, Any]]:
    """Run ``retriever`` with ``params`` twice and check the retriever contract; return the
    rankings (``{"qid", "ids", "scores"}`` per query). The first run starts from an empty
    cache, the second reads what the first cached (fresh outputs both times): both must rank
    alike. Takes the keyword arguments of :func:`run_retriever`."""
    results, outcomes = [], []
    cache = Path(tmp_path) / "cache"
    for attempt in ("first", "second"):
        outcome = run_retriever(retriever, params, Path(tmp_path) / attempt, cache_dir=cache, **options)
        healed = [note for note in outcome.notes if note.startswith("dropped") and "'under-test'" in note]
        assert not healed, f"the runner had to clean the rankings: {healed}"
        outcomes.append(outcome)
        results.append(_rankings(outcome.run_dir / "results.jsonl"))
    dataset = next(iter(outcomes)).spec.dataset_component.instance
    split = outcomes[0].spec.split
    k = outcomes[0].spec.k
    candidates = set(dataset.load_skb().candidate_ids.tolist())
    first, second = results
    assert [r["qid"] for r in first] == [q.id for q in dataset.load_queries().split(split)]
    for ranking in first:
        ids, scores = ranking["ids"], ranking["scores"]
        assert len(ids) <= k, f"query {ranking['qid']}: {len(ids)} results for k={k}"
        assert len(set(ids)) == len(ids), f"query {ranking['qid']}: repeated ids {ids}"
        assert set(ids) <= candidates, f"query {ranking['qid']}: non-candidate ids {set(ids) - candidates}"
        assert all(np.isfinite(scores)), f"query {ranking['qid']}: scores {scores}"
        assert all(a >= b for a, b in itertools.pairwise(scores)), f"not sorted: {scores}"
    assert [(r["ids"], r["scores"]) for r in first] == [(r["ids"], r["scores"]) for r in second], (
        "a run from the cache ranked differently from the run that filled it"
    )
    assert outcomes[0].row.config_hash == outcomes[1].row.config_hash, "one configuration, two hashes"
    return first


def checkpoint_entry(outcome: Any, cache_dir: str | os.PathLike[str]) -> Path:
    """The cache entry holding the checkpoint a :func:`run_retriever` outcome trained or loaded."""
    return Path(cache_dir) / "checkpoints" / f"under-test-{outcome.row.training.checkpoint}"


def check_training_resumes(
    retriever: type[Retriever],
    params: dict[str, Any],
    tmp_path: str | os.PathLike[str],
    *,
    fail_at: int,
    weights: Callable[[Path], dict[str, Any]],
    fail_param: str = "fail_at_epoch",
    **options: Any,
) -> tuple[Any, Any]:
    """Check a trained retriever's resume contract and return (resumed, uninterrupted) outcomes.

    A training is made to fail when epoch ``fail_at`` starts (through the hidden ``fail_param``
    option, which must not enter the checkpoint key or the row); training again must resume
    after the last finished epoch (every epoch once in the curve), leave no work directory
    behind, and end with the checkpoint key, the curve, the weights (``weights(entry)``: name ->
    array-like, compared exactly) and the metrics of a training never interrupted. Takes the
    keyword arguments of :func:`run_retriever`."""
    from harness.errors import HarnessError

    tmp = Path(tmp_path)
    cache, fresh = tmp / "cache", tmp / "fresh"
    try:
        run_retriever(retriever, {**params, fail_param: fail_at}, tmp / "failed", cache_dir=cache, **options)
    except HarnessError as exc:
        assert "failed to train" in str(exc) and f"epoch {fail_at}" in str(exc), str(exc)
    else:
        raise AssertionError(f"{fail_param}={fail_at} did not stop the training")
    [work] = (cache / "checkpoints").glob("*.work")
    assert any(work.iterdir()), "the failed training left no epoch checkpoint to resume from"
    resumed = run_retriever(retriever, params, tmp / "resumed", cache_dir=cache, **options)
    assert work.name == f"{checkpoint_entry(resumed, cache).name}.work", "the hidden option changed the key"
    assert not work.exists(), "the work directory outlived the finished training"
    assert fail_param not in resumed.row.retriever.params
    uninterrupted = run_retriever(retriever, params, tmp / "uninterrupted", cache_dir=fresh, **options)
    assert uninterrupted.row.training.checkpoint == resumed.row.training.checkpoint

    def curve(outcome: Any, where: Path) -> list[tuple[Any, Any]]:
        lines = (checkpoint_entry(outcome, where) / "curve.jsonl").read_text(encoding="utf-8").splitlines()
        return [(point.get("epoch"), point.get("loss")) for point in map(json.loads, lines)]

    epochs = [epoch for epoch, _ in curve(resumed, cache) if epoch is not None]
    assert epochs == sorted(set(epochs)), f"epochs trained twice after the resume: {epochs}"
    assert curve(resumed, cache) == curve(uninterrupted, fresh)
    ours, theirs = weights(checkpoint_entry(resumed, cache)), weights(checkpoint_entry(uninterrupted, fresh))
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert np.array_equal(np.asarray(ours[name]), np.asarray(theirs[name])), f"{name} differs after the resume"
    assert resumed.row.metrics == uninterrupted.row.metrics
    return resumed, uninterrupted


def _rankings(path: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [{"qid": r["qid"], "ids": r["ids"], "scores": r["scores"]} for r in rows]
