"""The synthesis pipeline and its ``harness synthesize`` command.

Stages run in order over a list of drafts; after each, the drafts are saved (atomically) under
``OUT/work/``, keyed by the configuration, so a rerun resumes after the last finished stage,
and the LLM response cache makes a stage interrupted half-way cheap to redo. The result is a
query set in STaRK's official layout (``qa/<dataset>/stark_qa/stark_qa.csv``, seeded 60/20/20
``split/*.index``), ``provenance.jsonl`` (template, gold, properties, LLMs, verdicts per query)
and ``synthesis.json`` (configuration and counts, including the gold answers' pass rate).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness import SKB, Query, QuerySet, atomic_write, stable_hash, write_json, write_stark_csv
from harness_synthesis.stage import Draft, SynthesisStage

__all__ = ["ROLES", "run_pipeline", "write_query_set"]

ROLES = {"amazon": "customer", "mag": "researcher", "prime": "doctor", "debian": "Debian user"}


def _save(path: Path, drafts: Sequence[Draft]) -> None:
    with atomic_write(path) as handle:
        for d in drafts:
            handle.write(
                json.dumps({"id": d.id, "text": d.text, "answer_ids": d.answer_ids, "provenance": d.provenance})
            )
            handle.write("\n")


def _load(path: Path) -> list[Draft]:
    drafts = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        drafts.append(Draft(row["id"], row["text"], row["answer_ids"], row["provenance"]))
    return drafts


def run_pipeline(
    skb: SKB, stages: Sequence[SynthesisStage], seed: int, work: Path, progress: Any = None
) -> list[Draft]:
    """Run ``stages``, resuming from the last one whose output ``work`` holds for this configuration."""
    drafts: list[Draft] = []
    chain: list[Any] = [skb.fingerprint, seed]
    for index, stage in enumerate(stages):
        chain.append([stage.name, stage.version, stage.params])
        path = work / f"{index}-{stage.name}-{stable_hash(chain)}.jsonl"
        if path.exists():
            drafts = _load(path)
            continue
        if progress:
            progress(f"{stage.name}: {len(drafts)} drafts in")
        drafts = stage.run(skb, drafts, seed)
        _save(path, drafts)
    return drafts


def write_query_set(out: Path, dataset: str, drafts: Sequence[Draft], config: dict[str, Any], seed: int) -> dict:
    """Write the official layout, the provenance and a summary; return the summary."""
    root = out / "qa" / dataset
    queries = [Query(d.id, d.text, tuple(d.answer_ids)) for d in drafts]
    write_stark_csv(root / "stark_qa" / "stark_qa.csv", queries)
    order = np.random.default_rng(seed).permutation(len(queries))
    cut1, cut2 = int(0.6 * len(queries)), int(0.8 * len(queries))
    for name, part in (("train", order[:cut1]), ("val", order[cut1:cut2]), ("test", order[cut2:])):
        with atomic_write(root / "split" / f"{name}.index") as handle:
            handle.write("".join(f"{queries[i].id}\n" for i in sorted(part)))
    with atomic_write(root / "provenance.jsonl") as handle:
        for d in drafts:
            handle.write(json.dumps({"id": d.id, "query": d.text, "answer_ids": d.answer_ids, **d.provenance}) + "\n")
    from harness import query_set_statistics  # the statistics `harness stats` reports

    judged = [d.provenance["filter"]["gold_passed"] for d in drafts if "filter" in d.provenance]
    # Share of a query's requirement words that are relational: the template's words against
    # the extracted properties' words (the fused text itself cannot be split reliably).
    ratios = []
    for d in drafts:
        relational = len(d.provenance.get("relational", {}).get("template_text", "").split())
        textual = sum(len(p.split()) for p in d.provenance.get("textual", {}).get("properties", []))
        if relational + textual:
            ratios.append(relational / (relational + textual))
    summary = {
        "dataset": dataset,
        "queries": len(queries),
        "answers_per_query": float(np.mean([len(d.answer_ids) for d in drafts])) if drafts else 0.0,
        "gold_pass_rate": float(np.mean(judged)) if judged else None,
        "relational_word_share": float(np.mean(ratios)) if ratios else None,
        "statistics": query_set_statistics(QuerySet(dataset, {"all": queries})),
        "config": config,
    }
    write_json(root / "synthesis.json", summary)
    return summary
