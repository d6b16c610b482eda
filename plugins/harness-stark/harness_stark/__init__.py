"""STaRK for stark-harness: the Amazon, MAG and Prime SKBs and their query sets.

Datasets ``stark-amazon``, ``stark-mag`` and ``stark-prime`` read the official release in its
own layout (see :mod:`harness_stark.files`): from ``--data-dir`` / ``$STARK_DATA_DIR`` when
given, else from the Hugging Face hub. Splits: ``train``, ``val``, ``test`` (``test-0.1`` when
the release has it) over the synthesized queries, and ``human-generated``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from harness.dataset import Dataset
from harness.errors import HarnessError
from harness.plugins.hookspecs import hookimpl
from harness.queries import QuerySet, load_stark_layout
from harness.skb import SKB
from harness_stark import files
from harness_stark.skb import AmazonSKB, MagSKB, PrimeSKB, StarkSKB, file_fingerprint, read_processed

__all__ = ["StarkAmazon", "StarkDataset", "StarkMag", "StarkPrime"]


class StarkDataset(Dataset):
    """One STaRK benchmark.

    Parameters:
        data_dir: a local copy of the release (default: ``$STARK_DATA_DIR``, else the hub).
        revision: a hub revision (branch, tag or commit) to pin.
    """

    version = "2"  # 2: Prime's relation groups in the official order, multiset-symmetric edges kept as is
    stark_name: ClassVar[str]
    skb_class: ClassVar[type[StarkSKB]]
    variant: ClassVar[str | None] = None

    def __init__(self, data_dir: str | None = None, revision: str | None = None, **skb_params: Any) -> None:
        params = {k: v for k, v in {"data_dir": data_dir, "revision": revision, **skb_params}.items() if v is not None}
        super().__init__(**params)
        self.data_dir, self.revision, self.skb_params = data_dir, revision, skb_params
        self._skb: SKB | None = None
        self._queries: QuerySet | None = None

    def load_queries(self) -> QuerySet:
        if self._queries is None:
            directory = files.qa_dir(self.stark_name, self.data_dir, self.revision)
            self._queries = load_stark_layout(directory, name=self.name)
        return self._queries

    def load_skb(self) -> SKB:
        if self._skb is None:
            directory = files.processed_dir(self.stark_name, self.data_dir, self.variant, self.revision)
            fingerprint = file_fingerprint(directory)
            processed = read_processed(directory, fingerprint)
            self._skb = self.skb_class(processed, fingerprint=fingerprint, **self.skb_params)
        return self._skb

    def describe(self) -> dict[str, Any]:
        """Query counts always; SKB counts when its files are there, else what is missing."""
        info: dict[str, Any] = {"dataset": self.name, "queries": self.load_queries().counts()}
        missing = files.missing_skb_files(self.stark_name, self.data_dir, self.variant)
        if missing:
            info["skb_missing"] = missing
            return info
        try:
            info.update(self.load_skb().counts())
        except HarnessError as exc:
            info["skb_error"] = str(exc)
        return info


class StarkAmazon(StarkDataset):
    """STaRK-Amazon: products, brands, categories, colours; candidates are products."""

    name = "stark-amazon"
    stark_name = "amazon"
    skb_class = AmazonSKB
    variant = AmazonSKB.VARIANT


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


@hookimpl
def register_datasets(register: Any) -> None:
    for dataset in (StarkAmazon, StarkMag, StarkPrime):
        register(dataset)
