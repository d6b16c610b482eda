"""Debian v2's ``qa/``: every split, written whole or checked (``python -m harness_debian.queries --version 2``).

:mod:`harness_debian.queries_v2` compiles the evaluation queries (specs, judgements, answers);
this module puts them together with the splits that derive from or sit beside them — the seeded
val/test split, ``test-paraphrased`` (:mod:`harness_debian.paraphrased`) and the train splits
(:mod:`harness_debian.train_files`) — writes ``qa/`` (:func:`write_qa`) or, with ``--check``,
verifies that ``qa/``, the shipped train splits (:func:`train_problems`) and the data card's train
sections (:mod:`harness_debian.train_card`) are what the sources give (:func:`run`).
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from harness import SKB, HarnessError, Query, load_stark_layout, replace_dir, write_stark_csv
from harness_debian.paraphrased import ID_OFFSET, SPLIT, paraphrased_split
from harness_debian.queries_v2 import Compiled, compile_v2, load_judgements, load_specs, review, to_queries
from harness_debian.train_card import problems as card_problems
from harness_debian.train_files import templated_dir, train_splits
from harness_debian.train_nl_merge import shipped_problems
from harness_debian.train_split import check as check_templated


def extra_splits(root: Path) -> dict[str, list[Query]]:
    """Splits compiled into ``qa/`` beside the evaluation splits (val, test): ``train``, the
    synthesized training queries of ``root/train/`` when they ship (see
    :mod:`harness_debian.train_split`). Their ids must not repeat an evaluation query's
    (checked by :func:`all_splits`)."""
    return train_splits(root)  # train, and train-templated once a natural-language train replaced it


def all_splits(root: Path, compiled: list[Compiled], split_ids: Any) -> dict[str, list[Query]]:
    """Every split ``qa/`` holds: the evaluation queries' seeded val/test split, ``test-paraphrased``
    (the test queries reworded, :mod:`harness_debian.paraphrased`) when ``root`` ships it, then
    :func:`extra_splits`."""
    queries = {q.id: q for q in to_queries(compiled)}
    splits = {name: [queries[i] for i in ids] for name, ids in split_ids(sorted(queries)).items()}
    paraphrased = paraphrased_split(root, {c.spec.id: c for c in compiled}, [q.id for q in splits.get("test", [])])
    if paraphrased:
        splits[SPLIT] = paraphrased
    for name, extra in extra_splits(root).items():
        if name in splits:
            raise HarnessError(f"{root}: extra split {name!r} has the name of an evaluation split")
        clash = sorted({q.id for q in extra} & set(queries))
        if clash:
            raise HarnessError(f"{root}: split {name!r} reuses evaluation query ids {clash[:10]}")
        splits[name] = list(extra)
    return splits


def write_qa(root: Path, compiled: list[Compiled], split_ids: Any) -> None:
    """``root/qa`` in STaRK's layout plus ``requirements.jsonl`` (each query's where, hops,
    candidate and answer counts), replaced as a whole."""
    splits = all_splits(root, compiled, split_ids)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".qa-", suffix=".tmp"))
    tmp.chmod(0o755)  # mkdtemp makes it private; qa/ is an ordinary directory
    try:
        evaluation = to_queries(compiled)  # in queries.yaml's order, then the extra splits'
        ids = {q.id for q in evaluation}
        extra = [q for queries in splits.values() for q in queries if q.id not in ids]
        write_stark_csv(tmp / "stark_qa" / "stark_qa.csv", evaluation + extra)
        (tmp / "split").mkdir()
        for split, queries in splits.items():
            (tmp / "split" / f"{split}.index").write_text("\n".join(str(q.id) for q in queries) + "\n")
        with open(tmp / "requirements.jsonl", "w", encoding="utf-8") as out:
            for c in compiled:
                row = {
                    "id": c.spec.id,
                    "where": c.spec.where,
                    "textual": c.spec.textual,
                    "hops": c.hops,
                    "candidates": len(c.candidates),
                    "answers": len(c.answers),
                }
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
            # a paraphrase has its test query's requirements (so `compare --by hops` groups it too)
            by_id = {c.spec.id: c for c in compiled}
            for q in splits.get(SPLIT, []):
                c = by_id[q.id - ID_OFFSET]
                row = {"id": q.id, "paraphrase_of": c.spec.id, "where": c.spec.where, "textual": c.spec.textual}
                row |= {"hops": c.hops, "candidates": len(c.candidates), "answers": len(c.answers)}
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
        replace_dir(tmp, root / "qa")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already on success


def stale(root: Path, compiled: list[Compiled], split_ids: Any) -> list[int]:
    """Ids whose shipped ``qa/`` row (or split) differs from what the specs and judgements give."""
    if not (root / "qa").exists():
        return [c.spec.id for c in compiled]
    shipped = load_stark_layout(root / "qa")
    splits = all_splits(root, compiled, split_ids)
    expected = {(name, q.id): q for name, queries in splits.items() for q in queries}
    rows = {(name, q.id): q for name in shipped for q in shipped.split(name)}
    bad = sorted({key[1] for key, q in rows.items() if expected.get(key) != q})
    return bad + sorted({key[1] for key in set(expected) - set(rows)} - set(bad))


def statistics_of(compiled: list[Compiled], split_ids: Any) -> dict[str, Any]:
    answers = [len(c.answers) for c in compiled]
    candidates = [len(c.candidates) for c in compiled]

    def summary(values: list[int]) -> dict[str, float]:
        return {
            "min": min(values),
            "median": statistics.median(values),
            "mean": round(statistics.fmean(values), 2),
            "max": max(values),
        }

    return {
        "queries": len(compiled),
        "answers": summary(answers),
        "candidates": summary(candidates),
        "two_hop_share": round(sum(c.hops >= 2 for c in compiled) / len(compiled), 4),
        "splits": {k: len(v) for k, v in split_ids([c.spec.id for c in compiled]).items()},
    }


_HOP_WORDS = {1: "one-hop", 2: "two-hop", 3: "three-hop", 4: "four-hop"}


def hops_line(compiled: list[Compiled]) -> str:
    """The card's count of queries by depth: ``72 queries one-hop, 238 two-hop, 2 three-hop``."""
    counts = Counter(c.hops for c in compiled)
    parts = [f"{counts[h]} {_HOP_WORDS.get(h, f'{h}-hop')}" for h in sorted(counts)]
    return ", ".join(parts).replace(" ", " queries ", 1)  # "72 queries one-hop, 238 two-hop, ..."


def hops_problems(card: Path, compiled: list[Compiled]) -> list[str]:
    """The card's "**Hops**" line against the queries' depths (empty: they agree)."""
    if not card.is_file():
        return []
    line = hops_line(compiled)
    if line not in card.read_text(encoding="utf-8"):
        return [f"{card}: the **Hops** line must say {line!r} (the depths of the queries' where)"]
    return []


def train_problems(root: Path, skb: SKB, evaluation: list[Query]) -> list[str]:
    """Problems of the train splits shipped under ``root`` (empty: none): a natural-language
    ``train/`` by :func:`harness_debian.train_nl_merge.shipped_problems`, then the templated split
    where it is (``train/`` or ``train-templated/``) by :func:`harness_debian.train_split.check`."""
    problems = []
    if (root / "train" / "queries.csv").exists() and templated_dir(root) != root / "train":
        problems += shipped_problems(root, skb, evaluation)
    return problems + check_templated(root, skb, evaluation)


def run(root: Path, split_ids: Any, check: bool, review_id: int | None, stats: bool) -> str:
    """The ``--version 2`` command; returns what to print."""
    specs = load_specs(root / "queries.yaml")
    skb = SKB.load(root / "skb")
    judgements = load_judgements(root / "judgements.yaml")
    if review_id is not None:
        spec = next((s for s in specs if s.id == review_id), None)
        if spec is None:
            raise HarnessError(f"{root / 'queries.yaml'}: no query with id {review_id}")
        return review(skb, spec, judgements)
    compiled = compile_v2(skb, specs, judgements, root / "judgements.yaml", root / "queries.yaml")
    # the shipped train splits against these evaluation queries: no gold of them may answer one
    problems = train_problems(root, skb, [q for q in to_queries(compiled) if q.answer_ids])
    if problems:
        raise HarnessError(f"{root / 'train'}: " + "; ".join(problems[:10]) + (" …" if len(problems) > 10 else ""))
    if check:
        bad = stale(root, compiled, split_ids)
        if bad:
            raise HarnessError(
                f"{root / 'qa'} is out of date (queries {bad[:10]}); run python -m harness_debian.queries "
                f"--version 2 --data {root}"
            )
        # the data card's "Train split" section is what the shipped train split gives, and its
        # hop counts are the queries' (`harness compare --by hops` shows the same groups)
        card = card_problems(root) + hops_problems(root / "README.md", compiled)
        if card:
            raise HarnessError("; ".join(card))
        message = f"{len(compiled)} v2 queries up to date"
    else:
        write_qa(root, compiled, split_ids)
        message = f"wrote {root / 'qa'}: {len(compiled)} v2 queries"
    if stats:
        message += "\n" + json.dumps(statistics_of(compiled, split_ids), indent=2)
    return message
