"""The dataset interface: an SKB and the query set asked of it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from harness.queries import QuerySet
from harness.skb import SKB


class Dataset(ABC):
    """Base class for dataset plugins. Subclass, set ``name``, implement the two loaders.

    Constructor keyword arguments are the dataset's parameters (from ``registry.yaml``,
    e.g. a data directory). Loaders should cache what they load on ``self`` and raise
    :class:`harness.errors.HarnessError` with the missing file's name when data is absent.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "0"

    def __init__(self, **params: Any) -> None:
        self.params = params

    @abstractmethod
    def load_skb(self) -> SKB:
        """The knowledge base queries are answered from."""

    @abstractmethod
    def load_queries(self) -> QuerySet:
        """The queries, with their splits."""

    def describe(self) -> dict[str, Any]:
        """Counts for ``harness describe``: nodes and edges by type, candidates, queries per split."""
        return {
            "dataset": self.name,
            **self.load_skb().counts(),
            "queries": self.load_queries().counts(),
        }
