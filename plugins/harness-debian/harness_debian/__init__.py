"""The embedded default SKB: Debian's package catalogue (bookworm, main, amd64).

A product-search world close to STaRK-Amazon: packages (the candidates) with summaries and
long descriptions, maintainers (brands), sections (categories), debtags (facets), and
package–package relations (depends, recommends, suggests, built from the same source).
The queries were written by hand in the manner of STaRK's human-generated queries; see
``data/README.md`` (the dataset card) and ``harness_debian.queries``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.dataset import Dataset
from harness.plugins.hookspecs import hookimpl
from harness.queries import QuerySet, load_stark_layout
from harness.skb import SKB

DATA = Path(__file__).parent / "data"


class DebianDataset(Dataset):
    """Debian packages as an SKB, with human-written queries (splits ``val`` and ``test``).

    Parameters:
        data_dir: a directory holding ``skb/`` and ``qa/`` (default: the copy shipped
            in this package).
    """

    name = "debian"
    version = "1"

    def __init__(self, data_dir: str | None = None) -> None:
        super().__init__(**({"data_dir": data_dir} if data_dir else {}))
        self.root = Path(data_dir) if data_dir else DATA
        self._skb: SKB | None = None
        self._queries: QuerySet | None = None

    def load_skb(self) -> SKB:
        if self._skb is None:
            self._skb = SKB.load(self.root / "skb")
        return self._skb

    def load_queries(self) -> QuerySet:
        if self._queries is None:
            self._queries = load_stark_layout(self.root / "qa", name="debian")
        return self._queries


@hookimpl
def register_datasets(register: Any) -> None:
    register(DebianDataset)
