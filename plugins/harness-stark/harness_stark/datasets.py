"""The three STaRK datasets and the parameters they share."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

import harness
from harness_stark import files
from harness_stark.graph import LAYOUT as GRAPH_LAYOUT
from harness_stark.skb import AmazonSKB, MagSKB, PrimeSKB, StarkSKB, file_fingerprint, read_processed

__all__ = ["StarkAmazon", "StarkDataset", "StarkMag", "StarkOptions", "StarkPrime"]


class StarkOptions(harness.Options):
    """Where the release is read from; what every STaRK dataset takes."""

    data_dir: str | None = Field(
        None,
        description=f"a local copy of the release in its layout (default: ${files.ENV_VAR}, else the hub)",
    )
    revision: str | None = Field(None, description="a hub revision (branch, tag or commit) to pin")


class StarkDataset(harness.Dataset):
    """One STaRK benchmark. Options beyond :class:`StarkOptions` go to its SKB class."""

    version = "2"  # 2: Prime's relation groups in the official order, multiset-symmetric edges kept as is
    stark_name: ClassVar[str]
    skb_class: ClassVar[type[StarkSKB]]
    variant: ClassVar[str | None] = None
    Options = StarkOptions
    options: StarkOptions

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        self._skb: StarkSKB | None = None
        self._queries: harness.QuerySet | None = None

    def load_queries(self) -> harness.QuerySet:
        if self._queries is None:
            directory = files.qa_dir(self.stark_name, self.options.data_dir, self.options.revision)
            self._queries = harness.load_stark_layout(directory, name=self.name)
        return self._queries

    def known_splits(self) -> list[str]:
        """A local copy's split files by name; the release's splits when it comes from the hub."""
        if files.local_root(self.options.data_dir) is None:
            return list(files.HUB_SPLITS)
        return self.layout_splits(files.qa_dir(self.stark_name, self.options.data_dir))

    def check_split(self, split: str) -> None:
        """The split's name, then the files: a run without them (no local copy, the hub out of
        reach) fails here, in a second, not after the hub library's minute of retries."""
        super().check_split(split)
        files.check_available(self.stark_name, self.options.data_dir, self.variant, self.options.revision)

    def load_skb(self) -> StarkSKB:
        if self._skb is None:
            directory = files.processed_dir(self.stark_name, self.options.data_dir, self.variant, self.options.revision)
            fingerprint = files_key = file_fingerprint(directory)
            processed = read_processed(directory, fingerprint)
            skb_options = self.options.model_dump(exclude=set(StarkOptions.model_fields))
            # Options that change the documents change the fingerprint (caches key on it);
            # at their defaults it stays the files' own, which rows already record.
            changed = self.options.model_dump(exclude=set(StarkOptions.model_fields), exclude_defaults=True)
            if changed:
                fingerprint = harness.stable_hash([fingerprint, changed], length=16)
            # The graph depends on the files (and the class's type dictionaries) only.
            graph = harness.cache_root() / "stark" / "graph" / f"{self.skb_class.__name__}-{files_key}-{GRAPH_LAYOUT}"
            self._skb = self.skb_class(processed, fingerprint=fingerprint, graph_cache=graph, **skb_options)
        return self._skb

    def describe(self) -> dict[str, Any]:
        """Query counts always; SKB counts when its files are there, else what is missing."""
        info: dict[str, Any] = {"dataset": self.name, "queries": self.load_queries().counts()}
        missing = files.missing_skb_files(self.stark_name, self.options.data_dir, self.variant)
        if missing:
            info["skb_missing"] = missing
            return info
        try:
            info.update(self.load_skb().counts())
        except harness.HarnessError as exc:
            info["skb_error"] = str(exc)
        return info


class StarkAmazon(StarkDataset):
    """STaRK-Amazon: products, brands, categories, colours; candidates are products."""

    name = "stark-amazon"
    stark_name = "amazon"
    skb_class = AmazonSKB
    variant = AmazonSKB.VARIANT

    class Options(StarkOptions):
        max_entries: int = Field(
            25,
            ge=0,
            description="the official loader's max_entries: a product document lists at most "
            "max_entries + 2 reviews and as many Q&A pairs (the official loop's count)",
        )


class StarkMag(StarkDataset):
    """STaRK-MAG: papers, authors, institutions, fields of study; candidates are papers."""

    name = "stark-mag"
    stark_name = "mag"
    skb_class = MagSKB


class StarkPrime(StarkDataset):
    """STaRK-Prime: the PrimeKG biomedical graph; every node is a candidate."""

    name = "stark-prime"
    stark_name = "prime"
    skb_class = PrimeSKB
