"""Query sets in STaRK's layout are parsed once: a second load reads the cache entry (keyed by
the files' digests, verified), an edited file is parsed again, a damaged entry is rebuilt."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.queries as queries_module
from harness.queries import Query, load_stark_layout, write_stark_csv


def _layout(root: Path) -> Path:
    qa = root / "qa" / "tiny"
    (qa / "split").mkdir(parents=True)
    write_stark_csv(qa / "stark_qa" / "stark_qa.csv", [Query(i, f"query {i}", (i, i + 1)) for i in range(1, 7)])
    (qa / "split" / "train.index").write_text("1\n2\n3\n")
    (qa / "split" / "test.index").write_text("4\n5\n6\n")
    return qa


def _no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: Path) -> list[Query]:
        raise AssertionError(f"{path} parsed again")

    monkeypatch.setattr(queries_module, "read_stark_csv", refuse)


def test_a_second_load_reads_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    qa = _layout(tmp_path)
    first = load_stark_layout(qa)
    with monkeypatch.context() as patched:
        _no_parsing(patched)
        again = load_stark_layout(qa)
    assert again.split_names == first.split_names == ["test", "train"]
    assert [again.split(s) for s in again.split_names] == [first.split(s) for s in first.split_names]
    assert again.name == "tiny" and load_stark_layout(qa, name="other").name == "other"


def test_an_edited_file_is_parsed_again(tmp_path: Path) -> None:
    qa = _layout(tmp_path)
    assert [q.id for q in load_stark_layout(qa).split("test")] == [4, 5, 6]
    (qa / "split" / "test.index").write_text("4\n6\n")
    assert [q.id for q in load_stark_layout(qa).split("test")] == [4, 6]
    write_stark_csv(qa / "stark_qa" / "stark_qa.csv", [Query(i, f"edited {i}", (i,)) for i in range(1, 7)])
    assert load_stark_layout(qa).split("test")[0].text == "edited 4"


def test_a_damaged_entry_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))
    qa = _layout(tmp_path)
    expected = load_stark_layout(qa).split("train")
    (entry,) = (tmp_path / "cache" / "queries").glob("*/splits.pkl")
    entry.write_bytes(entry.read_bytes()[:-20] + b"x" * 20)  # same size: only the digest tells
    monkeypatch.setenv("HARNESS_VERIFY_CACHES", "full")
    assert load_stark_layout(qa).split("train") == expected
    assert str(entry.parent) in capsys.readouterr().err
    monkeypatch.delenv("HARNESS_VERIFY_CACHES")
    with monkeypatch.context() as patched:
        _no_parsing(patched)
        assert load_stark_layout(qa).split("train") == expected  # rebuilt, and used again
