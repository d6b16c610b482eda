"""Helpers the core's tests share: a plain SKB and dataset whose results were worked out by
hand, the CONTRIBUTING plugin installed as documented, a plugin manager holding only given
components.

Importable from the core's tests (``from helpers import plain_skb``): pytest puts ``tests/`` on
the path. Core tests use fakes only: these, or the kit in ``harness.testing`` (whose
``OverlapRetriever`` is re-exported here). Plugins' tests use ``harness.testing`` alone.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import Field

import harness
from harness import SKB, Dataset, EdgeType, Query, QuerySet
from harness.testing import OverlapRetriever

__all__ = [
    "CONTRIBUTING",
    "REPO",
    "ComponentsPlugin",
    "OverlapRetriever",
    "PlainDataset",
    "contributing_block",
    "install_contributing_plugin",
    "installed_alone",
    "needs_stark_data",
    "plain_skb",
    "stark_data_dir",
]

REPO = Path(__file__).resolve().parent.parent


def plain_skb() -> SKB:
    """Five products, two brands: small enough to reason about by hand.

    Plainer than the kit's ``harness.testing.tiny_skb`` (no multi-edge, self-loop, unicode or
    list field): the documents, neighbours, counts and scores the core's tests expect were
    worked out by hand on this one, so it stays as it is."""
    names = ["red kettle", "blue kettle", "green teapot", "steel pan", "copper pot", "Acme", "Globex"]
    fields = [
        {"description": "an electric kettle in red, boils water fast"},
        {"description": "a blue stovetop kettle that whistles"},
        {"description": "a glass teapot for green tea"},
        {"description": "a steel frying pan"},
        {"description": "a heavy copper pot for soups"},
        {},
        {},
    ]
    src = np.array([0, 1, 2, 3, 4, 0])
    dst = np.array([5, 5, 6, 6, 6, 1])
    edge_type = np.array([0, 0, 0, 0, 0, 1])
    return SKB(
        name="plain",
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


class PlainDataset(Dataset):
    """The core tests' dataset, ``plain`` (registered by the root conftest's ``plain_plugins``):
    :func:`plain_skb` with the four hand-checked queries whose scores and counts tests assert,
    or the queries a test gives (how bad answer ids or a changed query set are handled)."""

    name = "plain"

    class Options(harness.Options):
        queries: list[list] | None = Field(None, description="[id, text, [answer ids]] rows instead of the four")

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        queries = self.options.queries
        rows = (
            queries
            if queries is not None
            else [
                [1, "red kettle that boils water", [0]],
                [2, "kettle", [0, 1]],
                [3, "copper pot for soups", [4]],
                [4, "glass teapot", [2]],
            ]
        )
        self._queries = QuerySet("plain", {"test": [Query(q, t, tuple(a)) for q, t, a in rows]})

    def load_skb(self) -> SKB:
        return plain_skb()

    def load_queries(self) -> QuerySet:
        return self._queries


def stark_data_dir() -> Path | None:
    """``$STARK_DATA_DIR``: real STaRK files in the official layout (``qa/<name>/...``), which the
    tests that read real query sets use; ``.ci/run`` points it at ``../shared/stark``."""
    value = os.environ.get("STARK_DATA_DIR")
    return Path(value) if value and (Path(value) / "qa").is_dir() else None


#: skip unless $STARK_DATA_DIR holds the real STaRK query sets
needs_stark_data = pytest.mark.skipif(stark_data_dir() is None, reason="set STARK_DATA_DIR to the STaRK files")


CONTRIBUTING = (REPO / "CONTRIBUTING.md").read_text()


def contributing_block(pattern: str) -> str:
    """The code block of CONTRIBUTING.md whose text matches ``pattern`` (a regex)."""
    import re

    for block in re.findall(r"```\w*\n(.*?)```", CONTRIBUTING, flags=re.DOTALL):
        if re.search(pattern, block):
            return block
    raise AssertionError(f"CONTRIBUTING.md has no code block matching {pattern!r}")


def install_contributing_plugin(workdir: Path) -> list[str]:
    """CONTRIBUTING's example plugin, laid out and installed as the guide says: its two files
    in ``harness-keyword-overlap/``, then the documented ``pip install -e`` (into ``workdir/site``
    with ``--target``, so the test environment is left alone). Returns the command that runs
    the harness CLI with that install on its path (``.pth`` files processed, as in a
    site-packages). Tests take it from the ``contributing_plugin`` fixture (installed once)."""
    import shlex

    project = workdir / "harness-keyword-overlap"
    project.mkdir(parents=True, exist_ok=True)
    (project / "keyword_overlap.py").write_text(contributing_block(r"\A# keyword_overlap\.py\n"))
    (project / "pyproject.toml").write_text(contributing_block(r"\A\[build-system\]"))
    install = next(
        shlex.split(line)
        for line in contributing_block(r"pip install -e ./harness-keyword-overlap").splitlines()
        if line.startswith("pip install")
    )
    site = workdir / "site"
    # the documented command; --no-deps: stark-harness and numpy are installed already
    command = [sys.executable, "-m", *install, "--no-deps", "--target", str(site), "--quiet"]
    built = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    assert built.returncode == 0, f"{shlex.join(command)} failed:\n{built.stdout}{built.stderr}"
    return [sys.executable, "-c", f"import site; site.addsitedir({str(site)!r}); import harness.cli as c; c.main()"]


class ComponentsPlugin:
    """A plugin registering the datasets and retrievers it is given, and one presets file."""

    def __init__(self, datasets: Sequence[type], retrievers: Sequence[type], presets: Path) -> None:
        self.datasets, self.retrievers, self.presets = datasets, retrievers, presets

    @harness.hookimpl
    def register_datasets(self, register):  # type: ignore[no-untyped-def]
        for dataset in self.datasets:
            register(dataset)

    @harness.hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        for retriever in self.retrievers:
            register(retriever)

    @harness.hookimpl
    def register_presets(self, register):  # type: ignore[no-untyped-def]
        register(self.presets)


def installed_alone(
    monkeypatch: pytest.MonkeyPatch,
    directory: Path,
    presets: str,
    datasets: Sequence[type],
    retrievers: Sequence[type],
    name: str = "components-plugin",
) -> Any:
    """The process-wide plugin manager with no installed plugin, only a :class:`ComponentsPlugin`
    (registered as ``name``) of these components and ``presets`` (YAML, written into ``directory``)."""
    from harness.plugins import get_plugin_manager, reset_plugin_manager

    monkeypatch.setenv("HARNESS_PLUGINS", "")
    reset_plugin_manager()
    (directory / "presets.yaml").write_text(presets)
    manager = get_plugin_manager()
    manager.register(ComponentsPlugin(datasets, retrievers, directory / "presets.yaml"), name)
    return manager


def terms(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class Seeded(harness.Retriever):
    """A trained retriever whose model depends on the seed: random term weights, nudged towards
    the train split's answers (so seeds differ, and training helps)."""

    name = "seeded"
    regime = "trained"

    def _vocab(self, skb: SKB) -> None:
        self.ids = skb.candidate_ids
        self.docs = [terms(skb.document(int(i))) for i in self.ids]
        self.vocab = sorted(set().union(*self.docs))

    def fit(self, skb: SKB, train: Sequence[Query], context: Any) -> None:
        self._vocab(skb)
        weights = 3 * np.random.default_rng(context.seed).random(len(self.vocab))
        index = {t: j for j, t in enumerate(self.vocab)}
        for q in train:
            for a in q.answer_ids:
                if a < len(self.ids):
                    for t in terms(q.text) & self.docs[a]:
                        weights[index[t]] += 0.2
        np.save(context.checkpoint_dir / "weights.npy", weights)
        context.report(1, len(train), 0.0, 0.0)

    def load_checkpoint(self, path: Path) -> None:
        self.weights = np.load(path / "weights.npy")

    def build(self, skb: SKB, context: harness.BuildContext) -> None:
        self._vocab(skb)
        self.index = {t: j for j, t in enumerate(self.vocab)}

    def search(
        self, queries: Sequence[Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        out = []
        for q in queries:
            found = terms(q.text)
            scores = np.asarray([sum(self.weights[self.index[t]] for t in found & d) for d in self.docs], dtype=float)
            order = np.argsort(-scores, kind="stable")[:k]
            out.append(harness.Ranking(self.ids[order], scores[order]))
        return out
