"""Metrics: equal to STaRK's official evaluator (run here, on seeded random cases), plus edge
cases. pytrec_eval and ir_measures agreement is in test_trec_reference.py."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from harness.errors import HarnessError
from harness.metrics import evaluate, parse_metrics
from harness.plugins.metric_families import BUILTIN_METRICS
from harness.run.scoring import hit_matrix
from harness.testing import official_evaluator

FAMILIES = {m.family: m for m in BUILTIN_METRICS}
CUTOFFS = (1, 3, 5, 10, 20, 50, 100)
#: official evaluator name → ours. Its "map@k" is our "stark_map@k"; our "map@k" is trec_eval's.
NAMES = {
    "mrr": "mrr",
    "rprecision": "rprecision",
    "map": "stark_map",
    "ndcg": "ndcg",
    **{f"{m}@{k}": f"{m}@{k}" for m in ("hit", "recall", "precision", "ndcg") for k in CUTOFFS},
    **{f"map@{k}": f"stark_map@{k}" for k in CUTOFFS},
}
NUM_NODES, NUM_QUERIES = 300, 240


@cache
def _cases(depth: int | None, positive: bool) -> dict:
    """Seeded random queries scored by the official Evaluator: a candidate set that is a strict
    subset of the nodes; answers with duplicates and non-candidates (some queries have no
    candidate answer); returned ids that include non-candidates; distinct scores (ties are
    ordered differently on purpose, see harness.metrics), all positive or some ≤ 0."""
    import torch

    rng = np.random.default_rng(20261122 + (depth or 0) + positive)
    candidates = np.sort(rng.choice(NUM_NODES, size=250, replace=False))
    is_candidate = np.zeros(NUM_NODES, dtype=bool)
    is_candidate[candidates] = True
    evaluator = official_evaluator()(candidates.tolist())
    rows = []
    for qid in range(NUM_QUERIES):
        answers = rng.choice(NUM_NODES, size=int(rng.integers(1, 9))).tolist()
        if qid % 10 == 0:
            answers += answers[:1]  # an explicit duplicate
        if qid % 37 == 0:
            answers = rng.choice(np.flatnonzero(~is_candidate), size=2).tolist()
        boosted = [a for a in answers if rng.random() < 0.5]  # so that metrics are not all near 0
        order = list(dict.fromkeys(boosted + rng.permutation(NUM_NODES).tolist()))
        if depth is None:  # every candidate, then a few non-candidates that both sides ignore
            ranked = [n for n in order if is_candidate[n]] + [n for n in order if not is_candidate[n]][:5]
        else:
            ranked = order[:depth]
        # distinct and exact in float32 (the official evaluator's dtype)
        top = 1000.0 if positive else 100.0
        scores = [top - 2 * i for i in range(len(ranked))]
        values = evaluator(dict(zip(ranked, scores, strict=True)), torch.LongTensor(answers), metrics=list(NAMES))
        rows.append({"ranked": ranked, "scores": scores, "answers": answers, "official": values})
    hits, n_relevant = hit_matrix([r["ranked"] for r in rows], [r["answers"] for r in rows], is_candidate)
    ours = evaluate(parse_metrics(list(NAMES.values()), FAMILIES), hits, n_relevant)
    return {"rows": rows, "ours": ours, "candidates": set(candidates.tolist())}


def _official(rows: list[dict], name: str) -> np.ndarray:
    return np.array([r["official"][name] for r in rows])


def test_full_rankings_match_the_official_evaluator_on_every_metric() -> None:
    case = _cases(None, True)
    rows, ours = case["rows"], case["ours"]
    for official, name in NAMES.items():
        # torchmetrics accumulates nDCG discounts in float32 (a few ulps per value); we use float64
        np.testing.assert_allclose(ours[name], _official(rows, official), atol=1e-6, rtol=1e-5, err_msg=name)
    # the cases are not trivial: answers are found at many depths
    assert 0.05 < ours["mrr"].mean() < 0.95
    assert (ours["hit@1"] == 0).any() and (ours["hit@1"] == 1).any()
    assert (ours["stark_map@100"] != ours["rprecision"]).any()


def test_truncated_rankings_match_the_official_evaluator_on_cutoff_metrics() -> None:
    """Where at least k candidates were returned, unreturned candidates cannot reach the
    official top k, so every @k metric agrees."""
    case = _cases(100, True)
    compared = 0
    for official, name in NAMES.items():
        if "@" not in official:
            continue
        k = int(official.split("@")[1])
        for i, row in enumerate(case["rows"]):
            if sum(1 for n in row["ranked"] if n in case["candidates"]) >= k:
                assert case["ours"][name][i] == pytest.approx(row["official"][official], abs=1e-6, rel=1e-5)
                compared += 1
    assert compared > 5_000


def test_truncated_rankings_differ_only_where_an_answer_was_not_returned() -> None:
    """The documented difference: the official evaluator still ranks unreturned candidates
    (below every returned one); here an answer that was not returned is not retrieved."""
    case = _cases(100, True)
    differing = 0
    for i, row in enumerate(case["rows"]):
        answers = set(row["answers"]) & case["candidates"]
        returned = set(row["ranked"]) & case["candidates"]
        if answers <= returned:
            for official in ("mrr", "map", "ndcg", "rprecision"):
                assert case["ours"][NAMES[official]][i] == pytest.approx(row["official"][official], abs=1e-6, rel=1e-5)
        elif answers and not (answers & returned):
            assert case["ours"]["mrr"][i] == 0.0 and row["official"]["mrr"] > 0
            differing += 1
    assert differing > 0


def test_scores_at_or_below_zero_are_masked_by_this_torchmetrics_only_where_documented() -> None:
    """torchmetrics ≥ 1.7.4 counts answers scored ≤ 0 as not found in recall, precision, MRR and
    MAP, not in hit rate, nDCG or R-precision. The harness counts every returned entry, so with
    scores from +100 down to -378 the unmasked metrics agree everywhere and the masked ones agree
    on every query whose answers all scored > 0 — and differ on some of the others."""
    from importlib.metadata import version

    from packaging.version import Version

    case = _cases(None, False)
    rows, ours = case["rows"], case["ours"]
    masked = Version(version("torchmetrics")) >= Version("1.7.4")
    differs = 0
    for official, name in NAMES.items():
        family = official.split("@")[0]
        if family in ("hit", "ndcg", "rprecision"):
            # float32 sums over 250 nDCG discounts drift by a few 1e-6
            np.testing.assert_allclose(ours[name], _official(rows, official), atol=1e-5, rtol=1e-5, err_msg=name)
            continue
        for i, row in enumerate(rows):
            scored = dict(zip(row["ranked"], row["scores"], strict=True))
            answers = set(row["answers"]) & case["candidates"]
            if not masked or all(scored[a] > 0 for a in answers):
                assert ours[name][i] == pytest.approx(row["official"][official], abs=1e-6, rel=1e-5), (name, i)
            else:
                differs += ours[name][i] != pytest.approx(row["official"][official], abs=1e-6)
    assert differs > 0 or not masked


def test_trec_eval_map_divides_by_all_answers_stark_map_by_those_found() -> None:
    hits, n_rel = hit_matrix([[1, 9, 8, 7]], [[1, 2, 3, 4]])
    values = evaluate(parse_metrics("map@4,stark_map@4,map", FAMILIES), hits, n_rel)
    assert values["map@4"][0] == pytest.approx(1 / 4)
    assert values["map"][0] == pytest.approx(1 / 4)
    assert values["stark_map@4"][0] == pytest.approx(1.0)


def test_every_metric_is_zero_when_every_ranking_is_empty() -> None:
    hits, n_rel = hit_matrix([[], []], [[1], [2, 3]])
    assert hits.shape == (2, 0)
    every = "hit@1,recall@5,precision@5,mrr,map,map@10,stark_map@10,ndcg,ndcg@10,rprecision"
    for name, values in evaluate(parse_metrics(every, FAMILIES), hits, n_rel).items():
        assert values.tolist() == [0.0, 0.0], name


def test_hand_computed_values() -> None:
    hits, n_rel = hit_matrix([[5, 1, 9, 2]], [[1, 2, 3]])
    values = evaluate(
        parse_metrics("hit@1,hit@2,recall@4,precision@2,mrr,map@4,stark_map@4,rprecision,ndcg@4", FAMILIES),
        hits,
        n_rel,
    )
    assert values["hit@1"][0] == 0 and values["hit@2"][0] == 1
    assert values["recall@4"][0] == pytest.approx(2 / 3)
    assert values["precision@2"][0] == pytest.approx(1 / 2)
    assert values["mrr"][0] == pytest.approx(1 / 2)
    assert values["map@4"][0] == pytest.approx((1 / 2 + 2 / 4) / 3)  # trec_eval: / all answers
    assert values["stark_map@4"][0] == pytest.approx((1 / 2 + 2 / 4) / 2)  # STaRK: / answers found
    assert values["rprecision"][0] == pytest.approx(1 / 3)
    dcg = 1 / np.log2(3) + 1 / np.log2(5)
    idcg = 1 + 1 / np.log2(3) + 1 / np.log2(4)
    assert values["ndcg@4"][0] == pytest.approx(dcg / idcg)


def test_repeated_ids_are_removed_before_ranks_are_counted() -> None:
    hits, n_rel = hit_matrix([[5, 5, 1], [7, 1, 7, 2]], [[1], [2]])
    values = evaluate(parse_metrics("mrr,hit@2,precision@3", FAMILIES), hits, n_rel)
    assert values["mrr"].tolist() == [0.5, 1 / 3]
    assert values["hit@2"].tolist() == [1.0, 0.0]


def test_duplicates_non_candidates_and_empty_answers() -> None:
    mask = np.array([True, True, True, False, True])
    hits, n_rel = hit_matrix([[3, 1, 1, 0], [0, 1], []], [[1, 1, 3], [3], [2]], mask)
    # query 0: id 3 is not a candidate (dropped), the repeated 1 keeps its first position
    assert hits[0].tolist()[:2] == [True, False] and n_rel.tolist() == [1, 0, 1]
    values = evaluate(parse_metrics("recall@10,mrr,ndcg@10,precision@1", FAMILIES), hits, n_rel)
    assert values["recall@10"].tolist() == [1.0, 0.0, 0.0]
    assert values["mrr"].tolist() == [1.0, 0.0, 0.0]
    assert values["precision@1"].tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "spec, message",
    [
        ("recall", "needs a cut-off"),
        ("recall@0", "positive"),
        ("rprecision@5", "takes no cut-off"),
        ("nope@3", "unknown metric"),
        ("hit@x", "bad metric"),
        ("", "no metrics"),
    ],
)
def test_bad_metric_specs(spec: str, message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        parse_metrics(spec, FAMILIES)
