"""The dataset interface: an SKB and the query set asked of it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from harness.options import Options, parse_options

if TYPE_CHECKING:  # numpy stays unimported until a dataset is loaded
    from harness.queries import QuerySet
    from harness.skb import SKB


class Dataset(ABC):
    """Base class for dataset plugins. Subclass, set ``name``, implement the two loaders.

    Its parameters (e.g. a data directory) are declared once in ``Options`` and validated
    into ``self.options``. Loaders should cache what they load on ``self`` and raise
    :class:`harness.HarnessError` with the missing file's name when data is absent.
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

    def describe(self) -> dict[str, Any]:
        """Counts for ``harness describe``: nodes and edges by type, candidates, queries per split."""
        return {
            "dataset": self.name,
            **self.load_skb().counts(),
            "queries": self.load_queries().counts(),
        }
