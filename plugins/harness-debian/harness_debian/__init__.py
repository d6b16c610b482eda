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

from pydantic import Field

import harness

DATA = Path(__file__).parent / "data"


class DebianDataset(harness.Dataset):
    """Debian packages as an SKB, with human-written queries (splits ``val`` and ``test``)."""

    name = "debian"
    version = "1"

    class Options(harness.Options):
        data_dir: str | None = Field(
            None, description="a directory holding skb/ and qa/ (default: the copy shipped in this package)"
        )

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._skb: harness.SKB | None = None
        self._queries: harness.QuerySet | None = None

    @property
    def root(self) -> Path:
        return Path(self.options.data_dir) if self.options.data_dir else DATA

    def load_skb(self) -> harness.SKB:
        if self._skb is None:
            self._skb = harness.SKB.load(self.root / "skb")
        return self._skb

    def load_queries(self) -> harness.QuerySet:
        if self._queries is None:
            self._queries = harness.load_stark_layout(self.root / "qa", name="debian")
        return self._queries


@harness.hookimpl
def register_datasets(register: Any) -> None:
    register(DebianDataset)


@harness.hookimpl
def register_presets(register: Any) -> None:
    register(Path(__file__).with_name("presets.yaml"))
