"""The Debian dataset: a shipped version (SKB and query sets), or a copy in ``data_dir``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

import harness

DATA = Path(__file__).parent / "data"
#: the shipped versions, each a directory holding skb/ and qa/ (and its dataset card, README.md)
VERSIONS = {"1": DATA / "v1", "2": DATA / "v2"}
LATEST: Literal["1", "2"] = "2"


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

    options: Options

    @property
    def version(self) -> str:  # type: ignore[override]
        """The chosen version: rows name it, so results of different versions never mix."""
        return self.options.version

    @property
    def root(self) -> Path:
        return Path(self.options.data_dir) if self.options.data_dir else VERSIONS[self.options.version]

    def load_queries(self) -> harness.QuerySet:
        """The query set in ``qa/``, each query's ``metadata`` read from ``qa/requirements.jsonl``
        where the version has one (v2: ``hops``, ``where``, ``textual``, ``candidates``,
        ``answers``), so that ``harness compare --by hops`` breaks results down by query type."""
        if self._queries is not None:
            return self._queries
        queries = super().load_queries()
        path = self.root / "qa" / "requirements.jsonl"
        if path.is_file():
            metadata = _read_requirements(path)
            splits = {
                name: [
                    dataclasses.replace(q, metadata={**q.metadata, **metadata[q.id]}) if q.id in metadata else q
                    for q in queries.split(name)
                ]
                for name in queries.split_names
            }
            self._queries = queries = harness.QuerySet(queries.name, splits)
        return queries


def _read_requirements(path: Path) -> dict[int, dict[str, Any]]:
    """Query id → its requirements (every field but the id), one JSON object per line."""
    rows: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
            qid = int(row.pop("id"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise harness.HarnessError(f"{path}:{number} is not a query's requirements ({exc})") from None
        if qid in rows:
            raise harness.HarnessError(f"{path}:{number}: query {qid} is listed twice")
        rows[qid] = row
    return rows
