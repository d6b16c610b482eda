"""The committed leaderboard, checked with the first-party plugins installed: every published
row equals trec_eval's implementations on the TREC run it keeps."""

from __future__ import annotations

import json

from helpers import REPO


def test_every_published_row_agrees_with_trec_eval() -> None:
    """The leaderboard's rows against pytrec_eval and ir_measures on the TREC runs it keeps,
    with qrels made from the installed dataset's answers (candidates only)."""
    from harness.leaderboard.rows import read_rows, run_dir_of
    from harness.run import load_dataset
    from harness.run.checks import candidate_mask
    from harness.testing import check_run

    board = REPO / "leaderboard"
    rows = read_rows(board)
    assert rows and {r.dataset.name for r in rows} == {"debian"}
    dataset = load_dataset("debian")
    mask = candidate_mask(dataset.load_skb())
    confirmed = 0
    seeded = 0
    for row in rows:
        run_dir = run_dir_of(board, row.run_dir)
        assert run_dir is not None
        # a row over seeds keeps each seed's run (its means are checked by leaderboard validate)
        runs = (
            [
                (run_dir / f"seed-{seed}", json.loads((run_dir / f"seed-{seed}" / "row.json").read_text()))
                for seed in row.seeds.values
            ]
            if row.seeds
            else [(run_dir, row.model_dump(mode="json"))]
        )
        seeded += bool(row.seeds)
        for directory, recorded in runs:
            evaluated = {json.loads(line)["qid"] for line in (directory / "per_query.jsonl").read_text().splitlines()}
            qrels = {
                str(q.id): {str(a): int(bool(mask[a])) for a in q.answer_ids}
                for q in dataset.load_queries().split(row.split)
                if q.id in evaluated
            }
            trec = directory / "run.trec.gz" if (directory / "run.trec.gz").exists() else directory / "run.trec"
            counts = check_run(recorded, directory / "per_query.jsonl", trec, qrels)
            confirmed += counts["pytrec_eval"]
    assert confirmed > 1000
