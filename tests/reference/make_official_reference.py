"""Produce ``official_metrics.json`` with STaRK's official evaluator (run once, committed).

    pip install stark-qa torchmetrics torch
    python tests/reference/make_official_reference.py

The cases are random but seeded: a candidate set that is a strict subset of the nodes,
answers with duplicates and non-candidates (some queries have no candidate answer),
returned ids that include non-candidates, and two ranking depths:

* ``full`` — every candidate is scored, so every metric must match ours exactly;
* ``top100`` — only the top 100 are returned; the official evaluator gives the rest the
  lowest score. Cut-off metrics with k ≤ 100 must still match.

All scores are positive (torchmetrics ≥ 1.7 masks answers scored ≤ 0 out of recall, MRR and MAP).
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import numpy as np
import torch

try:
    from stark_qa.evaluator import Evaluator
except ImportError:  # stark_qa's package __init__ pulls in optional heavy deps
    import importlib.util
    import sys

    spec = importlib.util.find_spec("stark_qa")
    path = Path(spec.submodule_search_locations[0]) / "evaluator.py"
    module_spec = importlib.util.spec_from_file_location("stark_evaluator", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["stark_evaluator"] = module
    module_spec.loader.exec_module(module)
    Evaluator = module.Evaluator

METRICS = [
    "mrr",
    "map",
    "ndcg",
    "rprecision",
    *(f"{m}@{k}" for m in ("hit", "recall", "precision", "map", "ndcg") for k in (1, 3, 5, 10, 20, 50, 100)),
]
NUM_NODES, NUM_QUERIES, SEED = 300, 400, 20261121


def main() -> None:
    rng = np.random.default_rng(SEED)
    candidates = np.sort(rng.choice(NUM_NODES, size=250, replace=False))
    evaluator = Evaluator(candidates.tolist())
    cases: dict[str, list[dict]] = {"full": [], "top100": []}
    for case, depth in (("full", None), ("top100", 100)):
        for qid in range(NUM_QUERIES):
            n_answers = int(rng.integers(1, 9))
            answers = rng.choice(NUM_NODES, size=n_answers).tolist()  # may repeat, may be non-candidates
            if qid % 10 == 0:
                answers = answers + answers[:1]  # an explicit duplicate
            if qid % 37 == 0:
                answers = rng.choice(np.setdiff1d(np.arange(NUM_NODES), candidates), size=2).tolist()
            # Bias some rankings towards answers so that metrics are not all near zero.
            pool = rng.permutation(NUM_NODES)
            boosted = [a for a in answers if rng.random() < 0.5]
            order = list(dict.fromkeys(boosted + pool.tolist()))
            if depth is None:
                ranked = [n for n in order if n in set(candidates.tolist())]
                ranked += [n for n in order if n not in set(candidates.tolist())][:5]  # ignored by both
            else:
                ranked = order[:depth]
            scores = [float(1000 - 2 * i) for i in range(len(ranked))]  # exact in float32, positive
            if depth is None:
                # non-candidate extras go to the end with the lowest scores
                pass
            pred = dict(zip(ranked, scores, strict=True))
            values = evaluator(pred, torch.LongTensor(answers), metrics=METRICS)
            cases[case].append({"qid": qid, "ranked": ranked, "scores": scores, "answers": answers, "official": values})
    out = {
        "generator": "stark_qa.evaluator.Evaluator",
        "versions": {pkg: importlib.metadata.version(pkg) for pkg in ("stark-qa", "torchmetrics", "torch")},
        "num_nodes": NUM_NODES,
        "candidates": candidates.tolist(),
        "metrics": METRICS,
        "cases": cases,
    }
    path = Path(__file__).with_name("official_metrics.json")
    path.write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
