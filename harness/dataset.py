"""The dataset interface: an SKB and the query set asked of it."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from harness.errors import HarnessError
from harness.options import Options, did_you_mean, parse_options
from harness.queries import HUMAN_SPLIT, QuerySet, load_stark_layout
from harness.skb import SKB


class Dataset(ABC):
    """Base class for dataset plugins. Subclass, set ``name``, implement the two loaders.

    Its parameters (e.g. a data directory) are declared once in ``Options`` and validated
    into ``self.options``. ``version`` goes into every row; a dataset whose parameters choose
    among versions makes it a property returning the chosen one. Loaders should cache what
    they load on ``self`` and raise :class:`harness.HarnessError` with the missing file's name
    when data is absent.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "0"
    Options: ClassVar[type[Options]] = Options

    def __init__(self, **params: Any) -> None:
        self.options = parse_options(type(self).Options, params, f"dataset {getattr(self, 'name', '?')!r}")

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter with the value in use (JSON types): what rows record and hash."""
        return self.options.model_dump(mode="json")

    @abstractmethod
    def load_skb(self) -> SKB:
        """The knowledge base queries are answered from."""

    @abstractmethod
    def load_queries(self) -> QuerySet:
        """The queries, with their splits."""

    def known_splits(self) -> list[str] | None:
        """The names of the splits ``load_queries`` gives, told cheaply (file names at most, never
        the SKB), so a mistyped ``--split`` fails before any work. None when they cannot be told
        without loading the queries: the split is then checked when they load."""
        return None

    def check_split(self, split: str) -> None:
        """Raise :class:`harness.HarnessError` when ``split`` cannot run here, before anything
        loads: an unknown name (with the known ones and the closest). Plugins whose data may be
        unreachable (a hub offline) extend it to say so now rather than after minutes of work."""
        names = self.known_splits()
        if names is not None and split not in names:
            raise HarnessError(
                f"dataset {getattr(self, 'name', '?')!r} has no split {split!r}{did_you_mean(split, names)}; "
                f"its splits: {', '.join(names) or 'none'}"
            )

    @staticmethod
    def layout_splits(root: str | os.PathLike[str]) -> list[str]:
        """The splits :func:`harness.load_stark_layout` finds under ``root`` (STaRK's
        ``qa/<dataset>/``), from the names of its files alone."""

        root = Path(root)
        splits = []
        if (root / "stark_qa" / "stark_qa.csv").exists():
            splits = sorted(path.stem for path in (root / "split").glob("*.index")) or ["all"]
        if (root / "stark_qa" / "stark_qa_human_generated_eval.csv").exists():
            splits.append(HUMAN_SPLIT)
        if not splits:  # the error loading would give, now
            raise HarnessError(f"no STaRK query files under {root} (expected stark_qa/stark_qa.csv)")
        return splits

    def describe(self) -> dict[str, Any]:
        """Counts for ``harness describe``: nodes and edges by type, candidates, queries per split."""
        return {
            "dataset": self.name,
            **self.load_skb().counts(),
            "queries": self.load_queries().counts(),
        }


class DirectoryDataset(Dataset):
    """A dataset kept in a directory: the SKB in the harness format under ``root/skb/`` (what
    :meth:`harness.SKB.save` writes) and its queries in STaRK's layout under ``root/qa/``.
    Subclasses declare ``Options`` and say where the directory is (``root``)."""

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._skb: SKB | None = None
        self._queries: QuerySet | None = None

    @property
    @abstractmethod
    def root(self) -> Path:
        """The directory holding ``skb/`` and ``qa/``; raise a HarnessError saying how to give it."""

    @property
    def queries_name(self) -> str:
        """The name the query set carries."""
        return self.name

    def load_skb(self) -> SKB:

        if self._skb is None:
            self._skb = SKB.load(self.root / "skb")
        return self._skb

    def load_queries(self) -> QuerySet:

        if self._queries is None:
            self._queries = load_stark_layout(self.root / "qa", name=self.queries_name)
        return self._queries

    def known_splits(self) -> list[str]:
        return self.layout_splits(self.root / "qa")  # file names only: `--split` checked before loading
