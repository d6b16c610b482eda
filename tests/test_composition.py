"""Parameters declared once and one composition mechanism: what runs is what is recorded and
hashed, and every component of a run is constructed and built once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import Field, model_validator

import harness
from harness import BuildContext, HarnessError, Query, Ranking, Retriever
from harness.plugins import PluginManager
from harness.run import Registry, Runner, resolve
from harness.run.registry import RetrieverEntry
from harness.testing import check_retriever, plugin_manager

CONSTRUCTED: list[str] = []
BUILT: list[str] = []


class Counted(Retriever):
    """Counts constructions and builds; ranks candidates by id, best first."""

    name = "counted"

    class Options(harness.Options):
        label: str = "x"
        uses_: list[str] = Field(default_factory=list, alias="uses")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        CONSTRUCTED.append(self.options.label)

    def uses(self) -> list[str]:
        return list(self.options.uses_)

    def build(self, skb: harness.SKB, context: BuildContext) -> None:
        BUILT.append(self.options.label)
        self.ids = skb.candidate_ids
        self.others = [context.retriever(name) for name in self.uses()]

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        for other in self.others:
            other.search(queries, k)
        return [Ranking(self.ids[:k], np.arange(k, 0, -1, dtype=float)) for _ in queries]


#: the default the next class derives; a test changes it as a plugin release would
DERIVED_DEPTH = 2


class Derived(Retriever):
    """A retriever whose ``depth`` is derived when not given."""

    name = "derived"

    class Options(harness.Options):
        depth: int | None = Field(None, description="how many candidates to return (derived when not given)")

        @model_validator(mode="after")
        def _derive(self) -> Derived.Options:
            if self.depth is None:
                self.depth = DERIVED_DEPTH
            return self

    def build(self, skb: harness.SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        depth = min(k, self.options.depth)
        return [Ranking(self.ids[:depth], np.arange(depth, 0, -1, dtype=float)) for _ in queries]


class Rogue(Retriever):
    """Asks for a retriever it did not declare in ``uses()``."""

    name = "rogue"

    def build(self, skb: harness.SKB, context: BuildContext) -> None:
        context.retriever("counted")

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        return []


class Outsider(Retriever):
    """Returns a brand (not a candidate) first: what it hands a composite must be cleaned."""

    name = "outsider"

    def build(self, skb: harness.SKB, context: BuildContext) -> None:
        self.ids = skb.candidate_ids

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        return [Ranking(np.r_[5, self.ids[: k - 1]], np.arange(k, 0, -1, dtype=float)) for _ in queries]


class FirstOnly(harness.Reranker):
    """Keeps its first stage's order (to see what the first stage handed over)."""

    name = "first-only"

    def rerank(self, queries: Sequence[Query], candidates: Sequence[Ranking], k: int) -> list[Ranking]:
        return [c.top(k) for c in candidates]


class Plugin:
    @harness.hookimpl
    def register_retrievers(self, register: Any) -> None:
        for cls in (Counted, Derived, Rogue, Outsider, FirstOnly):
            register(cls)


@pytest.fixture
def manager() -> PluginManager:
    CONSTRUCTED.clear()
    BUILT.clear()
    return plugin_manager(Plugin())


def run(manager: PluginManager, registry: Registry, retriever: str, tmp_path: Path) -> Any:
    spec = resolve(registry, manager, retriever, "tiny", "test", 3, ["hit@1", "mrr"])
    return Runner(manager, output_dir=tmp_path / "runs", device="cpu").run(spec)


def test_each_component_of_a_run_is_constructed_and_built_once(manager: PluginManager, tmp_path: Path) -> None:
    # a diamond: top uses left and right, both use bottom
    registry = Registry(
        retrievers={
            "top": RetrieverEntry(plugin="counted", params={"label": "top", "uses": ["left", "right"]}),
            "left": RetrieverEntry(plugin="counted", params={"label": "left", "uses": ["bottom"]}),
            "right": RetrieverEntry(plugin="counted", params={"label": "right", "uses": ["bottom"]}),
            "bottom": RetrieverEntry(plugin="counted", params={"label": "bottom"}),
        }
    )
    outcome = run(manager, registry, "top", tmp_path)
    assert sorted(CONSTRUCTED) == ["bottom", "left", "right", "top"]
    assert sorted(BUILT) == ["bottom", "left", "right", "top"]
    assert [info.name for info in outcome.row.uses] == ["left", "bottom", "right"]


def test_a_cycle_is_refused(manager: PluginManager) -> None:
    registry = Registry(
        retrievers={
            "a": RetrieverEntry(plugin="counted", params={"uses": ["b"]}),
            "b": RetrieverEntry(plugin="counted", params={"uses": ["a"]}),
        }
    )
    with pytest.raises(HarnessError, match=r"uses 'a' in a cycle \(a → b → a\)"):
        resolve(registry, manager, "a", "tiny", "test")


def test_a_retriever_gets_only_what_it_declared(manager: PluginManager, tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"asked for 'counted', which it does not name in uses\(\)"):
        run(manager, Registry(), "rogue", tmp_path)


def test_a_changed_derived_default_is_a_new_configuration(
    manager: PluginManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run(manager, Registry(), "derived", tmp_path)
    assert first.row.retriever.params == {"depth": 2}
    monkeypatch.setitem(globals(), "DERIVED_DEPTH", 3)  # a plugin release that derives another value
    second = run(manager, Registry(), "derived", tmp_path)
    assert second.row.retriever.params == {"depth": 3}
    assert second.row.config_hash != first.row.config_hash and second.resumed_queries == 0
    config = json.loads((second.run_dir / "config.json").read_text())
    assert config["retriever"]["params"] == {"depth": 3}


def test_bad_parameters_are_one_error_naming_each(manager: PluginManager) -> None:
    registry = Registry(retrievers={"d": RetrieverEntry(plugin="derived", params={"depth": "deep", "colour": 1})})
    with pytest.raises(HarnessError) as info:
        resolve(registry, manager, "d", "tiny", "test")
    message = str(info.value)
    assert message.startswith("retriever 'd': bad parameters:")
    assert "depth: Input should be a valid integer" in message and "colour: not a parameter" in message


def test_what_a_composite_receives_is_checked_like_a_run(manager: PluginManager, tmp_path: Path) -> None:
    registry = Registry(
        retrievers={"rr": RetrieverEntry(plugin="first-only", params={"first_stage": "outsider", "candidates": 3})}
    )
    outcome = run(manager, registry, "rr", tmp_path)
    assert "dropped 6 non-candidate ids from 'outsider''s rankings (STaRK's evaluator ignores them)" in outcome.notes
    ids = [json.loads(line)["ids"] for line in (outcome.run_dir / "results.jsonl").read_text().splitlines()]
    assert all(5 not in ranking for ranking in ids)


def test_the_contract_kit_runs_a_composite(tmp_path: Path) -> None:
    CONSTRUCTED.clear()
    rankings = check_retriever(
        FirstOnly,
        {"first_stage": "base", "candidates": 3},
        tmp_path,
        also=[Counted],
        presets={"base": {"plugin": "counted", "params": {"label": "base"}}},
    )
    assert len(rankings) == 6 and all(r["ids"] == [0, 1, 2] for r in rankings)


def test_the_contract_kit_catches_a_broken_retriever(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="clean the rankings"):
        check_retriever(Outsider, {}, tmp_path)


class Passer(Retriever):
    """Hands its own candidates to what it uses as ``top_ranked``."""

    name = "passer"

    class Options(harness.Options):
        inner: str

    def uses(self) -> list[str]:
        return [self.options.inner]

    def build(self, skb: harness.SKB, context: BuildContext) -> None:
        self.inner = context.retriever(self.options.inner)
        self.ids = skb.candidate_ids

    def search(self, queries: Sequence[Query], k: int, top_ranked: Sequence[Ranking] | None = None) -> list[Ranking]:
        given = [Ranking(self.ids[:k], np.arange(k, 0, -1, dtype=float)) for _ in queries]
        return self.inner.search(queries, k, given)


def test_top_ranked_reaches_only_retrievers_that_rerank(tmp_path: Path) -> None:
    manager = plugin_manager(Plugin(), _single(Passer))
    refused = Registry(retrievers={"p": RetrieverEntry(plugin="passer", params={"inner": "counted"})})
    with pytest.raises(HarnessError, match="'counted' searches every candidate; it cannot rerank given ones"):
        run(manager, refused, "p", tmp_path)
    reranked = Registry(
        retrievers={
            "p": RetrieverEntry(plugin="passer", params={"inner": "rr"}),
            "rr": RetrieverEntry(plugin="first-only", params={"first_stage": "outsider"}),
        }
    )
    outcome = run(manager, reranked, "p", tmp_path)
    assert outcome.row.num_queries == 6 and [u.name for u in outcome.row.uses] == ["rr", "outsider"]


def _single(cls: type[Retriever]) -> object:
    class One:
        @harness.hookimpl
        def register_retrievers(self, register: Any) -> None:
            register(cls)

    return One()
