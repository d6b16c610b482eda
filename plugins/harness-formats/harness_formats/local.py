"""The ``local`` dataset: what ``harness import`` wrote (or anything in the same layout)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

import harness


class LocalDataset(harness.DirectoryDataset):
    """An SKB in the harness format (``DATA_DIR/skb/``) with queries in STaRK's layout
    (``DATA_DIR/qa/``): the directory ``harness import --out DATA_DIR`` writes."""

    name = "local"
    version = "1"

    class Options(harness.Options):
        data_dir: str | None = Field(
            None, description="the directory holding skb/ and qa/ (what `harness import --out` wrote); required"
        )

    options: Options

    @property
    def root(self) -> Path:
        # Optional in Options so that listing datasets never needs it; required to load anything.
        if not self.options.data_dir:
            raise harness.HarnessError(
                "dataset 'local' needs its directory: --data-dir DIR, or params: {data_dir: DIR} in a "
                "registry entry (DIR is what `harness import ... --out DIR` wrote)"
            )
        root = Path(self.options.data_dir)
        if not (root / "skb" / "skb.json").is_file():
            problem = "does not exist" if not root.exists() else "has no skb/skb.json"
            raise harness.HarnessError(
                f"dataset 'local': {root} {problem}; it should be a directory `harness import --out` wrote "
                "(skb/ and qa/)"
            )
        return root

    @property
    def queries_name(self) -> str:
        return self.root.resolve().name

    def node_ids(self) -> list[str] | None:
        """The user's id of every node, in node order (``node_ids.txt``, which `harness import`
        writes); None for a directory without it."""
        path = self.root / "node_ids.txt"
        if not path.is_file():
            return None
        return path.read_text(encoding="utf-8").split("\n")[:-1]
