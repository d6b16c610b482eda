"""Fast fault tests of what a resume trusts (issue 32): a resume log that answers a query twice,
and an epoch checkpoint damaged on disk.

- A query answered twice in ``results.jsonl`` with another record is one error naming the file,
  both lines and the query (never "last wins": the run's ``run.trec`` and metrics would change
  with the order of the lines); the same record twice is counted once, with a note. Rankings a
  cluster delivers twice for one query must agree as well.
- A damaged epoch checkpoint is discarded with a warning and the loop resumes from the one before
  it, ending with the weights of a training never interrupted (the SIGKILL version of this is in
  ``tests/test_training_loop.py``; dense-ft's trainer checkpoints in its plugin's tests)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import harness
from harness import EpochLoop, HarnessError, TrainContext
from harness.testing import (
    Components,
    OverlapRetriever,
    TinyDataset,
    installed_plugins,
    invoke,
    require,
    run_retriever,
)


def _run(tmp_path: Path, **options: Any) -> Any:
    return run_retriever(OverlapRetriever, {}, tmp_path, fresh=False, **options)


def _log(outcome: Any) -> Path:
    return outcome.run_dir / "results.jsonl"


def _other_ranking(record: dict[str, Any]) -> dict[str, Any]:
    """The same query with another, well-formed ranking (its ids in reverse order)."""
    assert len(set(record["ids"])) > 1
    return {**record, "ids": record["ids"][::-1]}


@pytest.mark.parametrize("where", ["appended", "before-the-original"])
def test_a_query_answered_twice_with_another_ranking_is_refused(tmp_path: Path, where: str) -> None:
    first = _run(tmp_path)
    log = _log(first)
    lines = log.read_text().splitlines(keepends=True)
    record = next(json.loads(line) for line in lines if len(set(json.loads(line)["ids"])) > 1)
    original = 1 + next(i for i, line in enumerate(lines) if json.loads(line)["qid"] == record["qid"])
    duplicate = json.dumps(_other_ranking(record)) + "\n"
    if where == "appended":
        log.write_text("".join(lines) + duplicate)
        message = f"line {len(lines) + 1}: query {record['qid']} .* unlike on line {original} "
    else:
        log.write_text(duplicate + "".join(lines))
        message = f"line {original + 1}: query {record['qid']} .* unlike on line 1 "
    trec, before = first.run_dir / "run.trec", (first.run_dir / "run.trec").read_bytes()
    with pytest.raises(HarnessError, match=message) as caught:
        _run(tmp_path)
    said = str(caught.value)
    assert str(log) in said and "Delete the wrong line" in said and "--fresh" in said
    assert trec.read_bytes() == before, "the refused resume rewrote the run's outputs"
    assert len(log.read_text().splitlines()) == len(lines) + 1, "the log was changed: the user decides"


def test_the_command_exits_with_an_error_on_a_query_answered_twice(tmp_path: Path) -> None:
    installed_plugins(Components([OverlapRetriever], [TinyDataset]))
    args = ("run", "-r", "overlap", "-d", "tiny", "-s", "test")
    env = {"HARNESS_CACHE": str(tmp_path / "cache")}
    assert invoke(*args, env=env).exit_code == 0
    [log] = Path("runs").glob("tiny-test-overlap-*/results.jsonl")
    record = next(r for r in map(json.loads, log.read_text().splitlines()) if len(set(r["ids"])) > 1)
    with log.open("a") as handle:
        handle.write(json.dumps(_other_ranking(record)) + "\n")
    result = invoke(*args, env=env)
    assert result.exit_code != 0 and f"query {record['qid']} is answered a second time" in result.output


def test_the_same_record_twice_is_counted_once_with_a_note(tmp_path: Path) -> None:
    first = _run(tmp_path)
    log = _log(first)
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines) + lines[2] + lines[0])
    again = _run(tmp_path)
    assert again.resumed_queries == len(lines) and again.row.metrics == first.row.metrics
    assert [note for note in again.notes if "word for word" in note] == [
        f"{log}: 2 lines repeated an earlier line word for word, removed; each query counted once"
    ]
    assert (again.run_dir / "run.trec").read_text() == (first.run_dir / "run.trec").read_text()
    assert log.read_text() == "".join(lines), "the repeated lines are still in the log"
    third = _run(tmp_path)  # nothing left to say
    assert not [note for note in third.notes if "word for word" in note]
    log.write_text("".join(lines) + lines[1])
    assert any(f"{log}: 1 line repeated an earlier" in note for note in _run(tmp_path).notes)


class _Twice(harness.Executor):
    """Searches every shard in this process, then delivers the first shard again with its first
    ranking reversed (a cluster running a shard again, a nondeterministic retriever)."""

    name = "twice"

    def map(
        self,
        factory: Callable[[], Callable[[Any], Any]],
        items: Iterable[Any],
        *,
        description: str,
        num_gpus: float | None = None,
    ) -> Iterator[tuple[int, Any]]:
        worker = factory()
        results = [(index, worker(item)) for index, item in enumerate(items)]
        yield from results
        index, result = results[0]
        count, rankings, seconds = result["batches"][0]
        ranking = rankings[0]
        reversed_ranking = harness.Ranking(ranking.ids[::-1].copy(), ranking.scores.copy())
        yield index, {**result, "batches": [(count, [reversed_ranking, *rankings[1:]], seconds)]}


def test_a_query_delivered_twice_by_the_executor_with_another_ranking_is_refused(tmp_path: Path) -> None:
    installed_plugins(Components([OverlapRetriever], [TinyDataset]))  # what the shard's worker builds from
    with pytest.raises(HarnessError, match=r"query \d+ came back twice from the executor's workers"):
        run_retriever(OverlapRetriever, {"min_overlap": 0}, tmp_path, executor=_Twice(), batch_size=64)
    [log] = (tmp_path / "runs").glob("*/results.jsonl")
    qids = [json.loads(line)["qid"] for line in log.read_text().splitlines()]
    assert len(qids) == len(set(qids)), "a query was logged twice"


# -- epoch checkpoints ---------------------------------------------------------------------
def _train(tmp_path: Path, epochs: int, fail_at: int | None = None) -> tuple[EpochLoop, Any, list[int]]:
    """Three numbers trained ``epochs`` epochs by torch's and the epoch's NumPy random numbers."""
    torch = require("torch", install="pip install torch (see the README)")
    for sub in ("work", "checkpoint"):
        (tmp_path / sub).mkdir(parents=True, exist_ok=True)
    context = TrainContext(
        cache_dir=tmp_path, seed=3, work_dir=tmp_path / "work", checkpoint_dir=tmp_path / "checkpoint"
    )
    weights, ran = torch.zeros(3, dtype=torch.float64), []

    def restore(saved: Mapping[str, Any]) -> None:
        weights.copy_(saved["weights"])

    loop = EpochLoop(context, epochs, state=lambda: {"weights": weights.clone()}, restore=restore, fail_at=fail_at)
    for epoch in loop:
        weights += torch.rand(3, dtype=torch.float64) + torch.as_tensor(epoch.rng.random(3))
        ran.append(epoch.number)
        loop.end(epoch, loss=float(weights.sum()))
    return loop, weights, ran


def test_a_damaged_epoch_checkpoint_is_discarded_and_the_previous_good_one_resumed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(RuntimeError, match="failure injected at epoch 4"):
        _train(tmp_path / "a", 4, fail_at=4)
    state = tmp_path / "a" / "work" / "epochs" / "epoch-003" / "state.pt"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit, the size unchanged: only the digest can tell
    state.write_bytes(bytes(data))
    capfd.readouterr()
    loop, weights, ran = _train(tmp_path / "a", 4)
    err = capfd.readouterr().err
    assert f"warning: epoch checkpoint {state.parent} is damaged (state.pt does not match its digest)" in err
    assert loop.resumed_from == 2 and ran == [3, 4]
    _, uninterrupted, _ = _train(tmp_path / "b", 4)
    assert np.array_equal(weights.numpy(), uninterrupted.numpy())
    points = [json.loads(line) for line in (tmp_path / "a" / "work" / "curve.jsonl").read_text().splitlines()]
    assert [p["epoch"] for p in points] == [1, 2, 3, 4], "the damaged epoch's point was not logged again, once"


def test_with_every_epoch_checkpoint_damaged_training_starts_over(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(RuntimeError, match="failure injected at epoch 3"):
        _train(tmp_path / "a", 3, fail_at=3)
    for state in (tmp_path / "a" / "work" / "epochs").glob("epoch-*/state.pt"):
        data = bytearray(state.read_bytes())
        data[-1] ^= 0x01
        state.write_bytes(bytes(data))
    capfd.readouterr()
    loop, weights, ran = _train(tmp_path / "a", 3)
    assert capfd.readouterr().err.count("is damaged") == 2
    assert loop.resumed_from is None and ran == [1, 2, 3]
    _, uninterrupted, _ = _train(tmp_path / "b", 3)
    assert np.array_equal(weights.numpy(), uninterrupted.numpy())
