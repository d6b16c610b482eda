"""The Debian dataset: a shipped version (SKB and query sets), or a copy in ``data_dir``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

import harness

DATA = Path(__file__).parent / "data"
#: the shipped versions, each a directory holding skb/ and qa/ (and its dataset card, README.md)
VERSIONS = {"1": DATA / "v1", "2": DATA / "v2"}
LATEST = "2"


class DebianDataset(harness.DirectoryDataset):
    """Debian packages as an SKB, with human-written queries (splits ``val`` and ``test``)."""

    name = "debian"

    class Options(harness.Options):
        version: Literal["1", "2"] = Field(
            LATEST,
            description="dataset version: 2 (the benchmark: most queries two-hop, answers judged on full "
            "descriptions) or 1 (the first release, kept for comparison)",
        )
        data_dir: str | None = Field(
            None, description="a directory holding skb/ and qa/ (default: the chosen version shipped in this package)"
        )

        @field_validator("version", mode="before")
        @classmethod
        def _number_as_text(cls, value: Any) -> Any:
            return str(value) if isinstance(value, int) and not isinstance(value, bool) else value  # `version: 2`

    @property
    def version(self) -> str:  # type: ignore[override]
        """The chosen version: rows name it, so results of different versions never mix."""
        return self.options.version

    @property
    def root(self) -> Path:
        return Path(self.options.data_dir) if self.options.data_dir else VERSIONS[self.options.version]
