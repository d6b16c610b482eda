"""Query sets in STaRK's layout: a committed slice of the real files, and the full files when present."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import needs_stark_data, stark_data_dir

from harness.errors import HarnessError
from harness.queries import HUMAN_SPLIT, Query, QuerySet, load_stark_layout, sample, write_stark_csv

SLICE = Path(__file__).parent / "data" / "stark" / "qa" / "prime"


def test_real_slice_loads_with_splits_and_quirks() -> None:
    qs = load_stark_layout(SLICE)
    assert set(qs.split_names) == {"train", "val", "test", HUMAN_SPLIT}
    assert qs.counts()[HUMAN_SPLIT] == 10
    # Prime lists some answers twice; they are kept as written (metrics count them once)
    assert any(len(q.answer_ids) != len(set(q.answer_ids)) for s in qs for q in qs.split(s))
    human = qs.split(HUMAN_SPLIT)[0]
    assert "answer_ids_source" in human.metadata


@needs_stark_data
@pytest.mark.parametrize(
    "name, total, splits, human",
    [
        ("amazon", 9100, (5910, 1548, 1642), 81),
        ("mag", 13323, (7993, 2665, 2665), 84),
        ("prime", 11204, (6162, 2241, 2801), 109),
    ],
)
def test_full_stark_query_sets_have_published_counts(name: str, total: int, splits: tuple, human: int) -> None:
    qs = load_stark_layout(stark_data_dir() / "qa" / name)
    counts = qs.counts()
    assert (counts["train"], counts["val"], counts["test"]) == splits
    assert sum(splits) == total
    assert counts[HUMAN_SPLIT] == human


def test_round_trip_and_sampling(tmp_path: Path) -> None:
    queries = [Query(i, f"q{i}", (i, i + 1)) for i in range(50)]
    write_stark_csv(tmp_path / "stark_qa" / "stark_qa.csv", queries)
    loaded = load_stark_layout(tmp_path).split("all")
    assert loaded == queries
    a, b = sample(loaded, 0.1, seed=3), sample(loaded, 0.1, seed=3)
    assert a == b and len(a) == 5 and a != sample(loaded, 0.1, seed=4)


def test_bad_files_name_the_problem(tmp_path: Path) -> None:
    (tmp_path / "stark_qa").mkdir()
    csv = tmp_path / "stark_qa" / "stark_qa.csv"
    csv.write_text('id,query,answer_ids\n1,a,"[1, 2"\n')
    with pytest.raises(HarnessError, match=r"stark_qa.csv:2: answer_ids is not a list"):
        load_stark_layout(tmp_path)
    csv.write_text("id,query,answer_ids\n1,a,[1]\n1,b,[2]\n")
    with pytest.raises(HarnessError, match="duplicate query id 1"):
        load_stark_layout(tmp_path)
    csv.write_text("id,query,answer_ids\n1,a,[1]\n")
    (tmp_path / "split").mkdir()
    (tmp_path / "split" / "test.index").write_text("1\n2\n")
    with pytest.raises(HarnessError, match="1 query ids not in"):
        load_stark_layout(tmp_path)
    with pytest.raises(HarnessError, match="no STaRK query files"):
        load_stark_layout(tmp_path / "nothing")


def test_duplicate_ids_and_unknown_splits() -> None:
    with pytest.raises(HarnessError, match="duplicate query id 7"):
        QuerySet("x", {"test": [Query(7, "a", (1,)), Query(7, "b", (2,))]})
    with pytest.raises(HarnessError, match="no split 'train'"):
        QuerySet("x", {"test": []}).split("train")
