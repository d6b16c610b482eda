"""The official STaRK code as the benchmarks run it: ``stark-qa`` 1.1.0, imported as the
differential tests import it (``tests/official.py``).

``stark_qa``'s SKB modules import ``tdc.resource.PrimeKG`` at import time, used only to build
PrimeKG from raw downloads; PyTDC is not installed (it pins numpy < 2), so that one name is
stubbed when missing. The query set is read by the official ``STaRKDataset`` from the local
copy: its download step (which lists the hub's files even when they are all there) is left
out, and its split reader reads the split files the copy has.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: The metrics STaRK's evaluation script computes for every query (``eval.py``).
STARK_METRICS = [
    "mrr",
    "map",
    "rprecision",
    "recall@5",
    "recall@10",
    "recall@20",
    "recall@50",
    "recall@100",
    "hit@1",
    "hit@3",
    "hit@5",
    "hit@10",
    "hit@20",
    "hit@50",
]
#: The same metrics by the harness's names: STaRK's ``map`` is torchmetrics' average precision.
HARNESS_METRICS = ["stark_map@100" if m == "map" else m for m in STARK_METRICS]


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def stark_qa() -> Any:
    """The official ``stark_qa`` package, ``tdc`` stubbed when PyTDC is absent."""
    if "tdc" not in sys.modules and not installed("tdc"):
        resource = types.ModuleType("tdc.resource")
        resource.PrimeKG = None  # type: ignore[attr-defined]  # only the raw-data build path uses it
        sys.modules["tdc"] = types.ModuleType("tdc")
        sys.modules["tdc"].resource = resource  # type: ignore[attr-defined]
        sys.modules["tdc.resource"] = resource
    import stark_qa

    return stark_qa


def local_qa(name: str, root: str) -> Any:
    """The official query set of ``name`` from ``root/name`` (the release's ``qa`` layout)."""
    stark_qa()
    from stark_qa.retrieval import STaRKDataset

    class LocalSTaRKDataset(STaRKDataset):
        def _download(self) -> None:  # the files are in root/name already; the hub is not asked
            pass

        def get_idx_split(self, test_ratio: float = 1.0) -> dict[str, Any]:
            """As the official method, over the split files the local copy has (a copy may lack
            ``test-0.1.index``, which the official one requires)."""
            import torch

            if self.human_generated_eval:
                return {"human_generated_eval": torch.LongTensor(self.indices)}
            position = {query_id: i for i, query_id in enumerate(self.indices)}
            splits = {}
            for path in sorted(Path(self.split_dir).glob("*.index")):
                ids = [int(line) for line in path.read_text().split()]
                splits[path.stem] = torch.LongTensor([position[query_id] for query_id in ids])
            return splits

    return LocalSTaRKDataset(name, root)


def write_inputs(path: str, documents: list[str], queries: list[str]) -> dict[str, Any]:
    """Save what a reference reads (documents, query texts), so that it pays for no loader."""
    import pickle

    with open(path, "wb") as handle:
        pickle.dump({"documents": documents, "queries": queries}, handle, protocol=pickle.HIGHEST_PROTOCOL)
    return {"documents": len(documents), "queries": len(queries)}


def bm25s_alone(inputs: str, k: int, params: dict[str, Any], stemmer: str | None = None) -> dict[str, Any]:
    """bm25s by hand on saved inputs: tokenize the documents, index, tokenize the queries and
    retrieve the top ``k`` in one batch; ``params`` go to ``bm25s.tokenize`` (stopwords) and
    ``bm25s.BM25`` (the rest). Phases: import, read, tokenize, index, search."""
    import pickle

    from timing import Clock

    clock = Clock()
    import bm25s

    stem = None
    if stemmer is not None:
        import Stemmer

        stem = Stemmer.Stemmer(stemmer)
    clock.lap("import")
    with open(inputs, "rb") as handle:
        data = pickle.load(handle)
    clock.lap("read")
    params = dict(params)
    tokenize = {"stopwords": params.pop("stopwords", "english"), "stemmer": stem, "show_progress": False}
    tokens = bm25s.tokenize(data["documents"], **tokenize)
    clock.lap("tokenize")
    index = bm25s.BM25(**params)
    index.index(tokens, show_progress=False)
    clock.lap("index")
    index.retrieve(bm25s.tokenize(data["queries"], **tokenize), k=k, show_progress=False)
    clock.lap("search")
    return {"phases": clock.phases}


def trec_eval_measures(metrics: list[str]) -> dict[str, str]:
    """The harness metrics among ``metrics`` that trec_eval defines alike -> trec_eval's names."""
    from harness.metrics import parse_metrics
    from harness.plugins.metric_families import BUILTIN_METRICS

    parsed = parse_metrics(metrics, {m.family: m for m in BUILTIN_METRICS})
    return {m.name: m.trec_eval_measure for m in parsed if m.trec_eval_measure}


def _split(measure: str) -> tuple[str, str]:
    """``success_5`` -> (``success``, ``5``); ``map`` -> (``map``, ``""``)."""
    base, _, cut = measure.rpartition("_")
    return (base, cut) if cut.isdigit() else (measure, "")


def pytrec_eval_spec(measures: Iterable[str]) -> set[str]:
    """pytrec_eval's request for trec_eval ``measures`` (``{"success.1,5", "map"}``)."""
    cuts: dict[str, set[str]] = {}
    for measure in measures:
        base, cut = _split(measure)
        cuts.setdefault(base, set()).add(cut)
    return {base if c == {""} else f"{base}." + ",".join(sorted(c)) for base, c in cuts.items()}
