"""The Debian v2 ``train`` split in natural language: drafts sampled by code, texts written by hand.

::

    python -m harness_debian.train_nl draft [--n 2520 --parts 6 --seed 0]   # train-nl/drafts/part-KK.jsonl
    python -m harness_debian.train_nl check [--part KK] [--full]            # every written text against its draft
    python -m harness_debian.train_nl merge                                 # train/ (the templated: train-templated/)
    python -m harness_debian.train_nl stats                                 # the figures of what is written so far

A **draft** (:mod:`harness_debian.train_nl_core`) is a requirement and its answers, all derived
by code from the SKB: a ``where`` spec of one of its ``SHAPES`` (modelled on the evaluation
queries' shapes, most of them two-hop), grounded from a gold package that answers no evaluation
query, its relational candidates (``queries_v2.Graph``), 0–2 **properties** (short phrases of the
gold's summary or description that narrow the candidates to at most ``MAX_ANSWERS``) and the
**answers**: the candidates whose document has every property
(``harness_synthesis.requests.property_holds``, the literal judge). No answer of a draft answers a
val or test query.

A **text** is written by a person (or an LLM agent writing by hand) for each draft, in
``train-nl/texts/part-KK.yaml`` (``- id: 200000`` / ``text: …`` / ``by: …``), following
``train-nl/AUTHORING.md``; ``check`` refuses a text that does not state the draft
(:mod:`harness_debian.train_nl_check`). ``merge`` (:mod:`harness_debian.train_nl_merge`) writes
every checked text's query, in STaRK's layout, to ``data/v2/train`` (moving the templated split
to ``train-templated`` first).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness import SKB, HarnessError
from harness_debian.train_nl_core import check, default_root, draft_all, evaluation
from harness_debian.train_nl_merge import merge, statistics_of


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["draft", "check", "merge", "stats"])
    parser.add_argument("--data", type=Path, default=None, help="the v2 directory (default: the shipped one)")
    parser.add_argument("--n", type=int, default=2520, help="draft: how many drafts")
    parser.add_argument("--parts", type=int, default=6, help="draft: into how many parts")
    parser.add_argument("--seed", type=int, default=0, help="draft: the sampling seed")
    parser.add_argument("--part", default=None, help="check: only this part (KK)")
    parser.add_argument("--full", action="store_true", help="check: also recompute every draft from the SKB")
    args = parser.parse_args(argv)
    root = args.data or default_root()
    try:
        if args.command == "draft":
            queries = evaluation(root)
            records = draft_all(SKB.load(root / "skb"), {a for q in queries for a in q.answer_ids}, args.n, args.seed)
            (root / "train-nl" / "drafts").mkdir(parents=True, exist_ok=True)
            size = -(-len(records) // args.parts)
            for k in range(args.parts):
                chunk = records[k * size : (k + 1) * size]
                path = root / "train-nl" / "drafts" / f"part-{k + 1:02d}.jsonl"
                path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chunk), encoding="utf-8")
            manifest = {"n": args.n, "parts": args.parts, "seed": args.seed}
            (root / "train-nl" / "drafts" / "manifest.json").write_text(json.dumps(manifest) + "\n")
            share = sum(r["hops"] >= 2 for r in records) / len(records)
            print(f"{len(records)} drafts in {args.parts} parts ({share:.1%} two-hop), seed {args.seed}")
        elif args.command == "check":
            problems, records = check(root, args.part, args.full)
            print("\n".join(problems))
            print(f"{len(records)} texts checked, {len(problems)} problem(s)", file=sys.stderr)
            if problems:
                sys.exit(1)
        elif args.command == "merge":
            stats = merge(root)
            print(json.dumps({k: stats[k] for k in ("queries", "two_hop_share", "answers")}, indent=2))
            print(
                "now recompile qa/ and the card: python -m harness_debian.queries --version 2; "
                "python -m harness_debian.train_card"
            )
        else:
            _, records = check(root)
            print(json.dumps(statistics_of(records, evaluation(root)), indent=2))
    except HarnessError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    main()
