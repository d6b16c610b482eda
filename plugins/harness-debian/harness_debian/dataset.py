"""The Debian dataset: the shipped SKB and query sets, or a copy in ``data_dir``."""

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

    def known_splits(self) -> list[str]:
        return self.layout_splits(self.root / "qa")  # file names only: `--split` checked before loading
