"""The Debian dataset: the shipped SKB and query sets, or a copy in ``data_dir``."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

import harness

DATA = Path(__file__).parent / "data"


class DebianDataset(harness.DirectoryDataset):
    """Debian packages as an SKB, with human-written queries (splits ``val`` and ``test``)."""

    name = "debian"
    version = "1"

    class Options(harness.Options):
        data_dir: str | None = Field(
            None, description="a directory holding skb/ and qa/ (default: the copy shipped in this package)"
        )

    @property
    def root(self) -> Path:
        return Path(self.options.data_dir) if self.options.data_dir else DATA
