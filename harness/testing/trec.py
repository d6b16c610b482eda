"""Score a run directory's ``run.trec`` against its ``qrels.trec`` with pytrec_eval and with
ir_measures (which reads the TREC files with its own parser), and check that every metric of
the row whose definition trec_eval shares equals theirs, query by query and on average.

The root conftest applies this to every run the suite makes in-process; a plugin's test may call
:func:`check_run_dir` on a run directory it made otherwise (a ``harness run`` in a subprocess).
"""

from __future__ import annotations

import gzip
import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.metrics import parse_metrics
from harness.plugins.metric_families import BUILTIN_METRICS
from harness.testing.references import ir_measures, pytrec_eval

FAMILIES = {m.family: m for m in BUILTIN_METRICS}
#: trec_eval measure (without its cut-off) → ir_measures' name for it.
IR_MEASURES = {
    "success": "Success",
    "recall": "R",
    "P": "P",
    "recip_rank": "RR",
    "map": "AP",
    "map_cut": "AP",
    "ndcg": "nDCG",
    "ndcg_cut": "nDCG",
    "Rprec": "Rprec",
}
TOLERANCE = 1e-9


def _ir_measures_name(trec: str) -> str:
    base, _, cut = trec.rpartition("_") if trec[-1].isdigit() else (trec, "", "")
    return f"{IR_MEASURES[base]}@{cut}" if cut else IR_MEASURES[base]


def check_run_dir(run_dir: str | Path) -> dict[str, int]:
    """Assert the row in ``run_dir`` agrees with pytrec_eval and ir_measures; return how many
    (metric, query) values each reference confirmed."""
    run_dir = Path(run_dir)
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for line in (run_dir / "qrels.trec").read_text().splitlines():
        qid, _, doc, rel = line.split()
        qrels[qid][doc] = int(rel)
    return check_run(
        json.loads((run_dir / "row.json").read_text()), run_dir / "per_query.jsonl", run_dir / "run.trec", qrels
    )


def check_run(
    row: dict[str, Any], per_query_file: Path, run_file: Path, qrels: dict[str, dict[str, int]]
) -> dict[str, int]:
    """The same check for a row, its per-query file, its TREC run (possibly gzip'd) and qrels."""
    per_query = [json.loads(line) for line in per_query_file.read_text().splitlines()]
    trec = {m.name: m.trec_eval_measure for m in parse_metrics(list(row["metrics"]), FAMILIES) if m.trec_eval_measure}
    if not trec:
        return {"pytrec_eval": 0, "ir_measures": 0}
    if run_file.suffix == ".gz":
        with tempfile.TemporaryDirectory() as work:
            plain = Path(work) / "run.trec"
            plain.write_bytes(gzip.decompress(run_file.read_bytes()))
            return check_run(row, per_query_file, plain, qrels)
    run: dict[str, dict[str, float]] = defaultdict(dict)
    for line in run_file.read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        run[qid][doc] = float(score)

    engine = pytrec_eval()
    requested: dict[str, set[str]] = defaultdict(set)
    for measure in trec.values():
        base, _, cut = measure.rpartition("_") if measure[-1].isdigit() else (measure, "", "")
        requested[base].add(cut)
    spec = {
        base if cuts == {""} else f"{base}." + ",".join(sorted(c for c in cuts if c))
        for base, cuts in requested.items()
    }
    by_pytrec = engine.RelevanceEvaluator(dict(qrels), spec).evaluate(dict(run))

    ir = ir_measures()
    measures = {name: ir.parse_measure(_ir_measures_name(measure)) for name, measure in trec.items()}
    by_ir: dict[str, dict[str, float]] = defaultdict(dict)
    # ir_measures parses the run file itself (its own reader, its own tie handling)
    for value in ir.iter_calc(list(measures.values()), dict(qrels), ir.read_trec_run(str(run_file))):
        by_ir[value.query_id][str(value.measure)] = value.value

    # `trec_eval -c` averages over the qrels' queries: they must be exactly the evaluated ones
    # (a query without a candidate answer is in the qrels with relevance-0 lines only)
    assert set(qrels) == {str(r["qid"]) for r in per_query}, (run_file, "qrels and evaluated queries differ")
    confirmed = {"pytrec_eval": 0, "ir_measures": 0}
    for name, measure in trec.items():
        total = 0.0
        for record in per_query:
            qid, ours = str(record["qid"]), record["metrics"][name]
            # a query with an empty ranking is not in the run file: trec_eval -c scores it 0
            theirs = by_pytrec.get(qid, {}).get(measure, 0.0)
            assert abs(ours - theirs) <= TOLERANCE, (run_file, name, qid, ours, "pytrec_eval", theirs)
            other = by_ir.get(qid, {}).get(str(measures[name]), 0.0)
            assert abs(ours - other) <= TOLERANCE, (run_file, name, qid, ours, "ir_measures", other)
            confirmed["pytrec_eval"] += 1
            confirmed["ir_measures"] += 1
            total += theirs
        assert abs(row["metrics"][name] - total / len(per_query)) <= TOLERANCE, (run_file, name)
    return confirmed
