"""Submissions end to end: runs of a fake retriever bundled, validated (metrics recomputed from
the TREC runs), merged into a leaderboard; tampered, malformed and duplicate submissions refused with a
reason and the leaderboard left byte for byte as it was."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import Field, model_validator

import harness
from harness.cli import cli
from harness.errors import HarnessError
from harness.io import stable_hash
from harness.leaderboard.bundles import collect
from harness.leaderboard.merge import merge
from harness.leaderboard.rows import LeaderboardRow, read_rows, row_path
from harness.leaderboard.submit import bundle
from harness.leaderboard.validate import validate
from harness.plugins import PluginManager, get_plugin_manager, reset_plugin_manager
from harness.run import Runner, resolve
from harness.run.registry import parse_registry

REGISTRY = """
defaults: {dataset: plain, retriever: overlap, split: test, k: 3}
datasets:
  plain: {plugin: plain, splits: [test]}
retrievers:
  overlap: {plugin: overlap, params: {min_overlap: %s}}
  overlap-strict: {plugin: overlap, params: {with_relations: true, min_overlap: 3}}
"""


def _run(plugins: PluginManager, out: Path, retriever: str = "overlap", min_overlap: int = 1) -> Path:
    registry = parse_registry(REGISTRY % min_overlap, "test-registry.yaml")
    spec = resolve(registry, plugins, retriever, metrics=["hit@1", "recall@3", "mrr"])
    return Runner(plugins, output_dir=out, device="cpu").run(spec).run_dir


@pytest.fixture
def runs(plain_plugins: PluginManager, tmp_path: Path) -> dict[str, Path]:
    return {
        "overlap": _run(plain_plugins, tmp_path / "runs"),
        "overlap-strict": _run(plain_plugins, tmp_path / "runs", "overlap-strict"),
        "overlap-min2": _run(plain_plugins, tmp_path / "other-runs", min_overlap=2),
    }


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _validate(path: Path, tmp_path: Path) -> list:
    return validate(collect(path, tmp_path / "unpacked"))


def test_submit_validate_merge_round_trip(runs: dict[str, Path], tmp_path: Path) -> None:
    archive = tmp_path / "submission.tar.gz"
    manifest = bundle([runs["overlap"], runs["overlap-strict"]], archive)
    assert len(manifest["runs"]) == 2 and manifest["environment"]["packages"]["stark-harness"]
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "manifest.json" in names and any(n.endswith("/run.trec") for n in names)
    assert all(r.ok for r in _validate(archive, tmp_path))

    board = tmp_path / "leaderboard"
    actions = merge([archive], board)
    assert sorted(a.kind for a in actions) == ["added", "added"]
    rows = read_rows(board)
    assert {r.retriever.name for r in rows} == {"overlap", "overlap-strict"}
    for row in rows:  # the leaderboard keeps the per-query results, compressed
        run_dir = board / row.run_dir
        assert (run_dir / "per_query.jsonl").is_file() and (run_dir / "run.trec.gz").is_file()
    assert json.loads((board / "schema.json").read_text()) == json.loads(
        CliRunner().invoke(cli, ["leaderboard", "schema"]).output
    )
    assert all(r.ok for r in _validate(board, tmp_path / "again"))

    again = merge([archive], board)  # the same configurations: replaced, reported, never doubled
    assert [a.kind for a in again] == ["replaced", "replaced"]
    assert "metrics unchanged" in again[0].describe()
    assert len(read_rows(board)) == 2
    changelog = (board / "CHANGELOG.md").read_text()
    assert changelog.count("\n## ") == 2
    assert changelog.index("2 replaced") < changelog.index("2 added")  # newest first
    assert "submission.tar.gz" in changelog and "**overlap-strict**" in changelog


def _edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _edit_lines(path: Path, change: Callable[[list[dict]], None]) -> None:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    change(records)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _inflate_row(run: Path) -> None:
    _edit_json(run / "row.json", lambda row: row["metrics"].update(mrr=row["metrics"]["mrr"] + 0.01))


def _lie_everywhere(run: Path) -> None:
    """Per-query values and the row changed together: only the rankings give it away."""
    records = [json.loads(line) for line in (run / "per_query.jsonl").read_text().splitlines()]
    lowest = min(records, key=lambda r: r["metrics"]["mrr"])
    lowest["metrics"]["mrr"] = lowest["metrics"]["mrr"] + 0.5
    (run / "per_query.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    mean = sum(r["metrics"]["mrr"] for r in records) / len(records)
    _edit_json(run / "row.json", lambda row: row["metrics"].update(mrr=mean))


def _swap_ranks(run: Path) -> None:
    lines = (run / "run.trec").read_text().splitlines()
    first, second = lines[0].split(), lines[1].split()
    first[2], second[2] = second[2], first[2]
    (run / "run.trec").write_text("\n".join([" ".join(first), " ".join(second), *lines[2:]]) + "\n")


def _change_params(run: Path) -> None:
    _edit_json(run / "config.json", lambda c: c["retriever"]["params"].update(min_overlap=5))


def _rehashed_unknown_dataset(run: Path) -> None:
    """A self-consistent row for a dataset this machine does not have."""
    config = json.loads((run / "config.json").read_text())
    config["dataset"]["plugin"] = "no-such-dataset"
    (run / "config.json").write_text(json.dumps(config))
    _edit_json(
        run / "row.json",
        lambda row: row.update(
            config_hash=stable_hash(config), dataset={**row["dataset"], "plugin": "no-such-dataset"}
        ),
    )


def _edited_answers(run: Path, claimed: bool = False) -> None:
    """The queries' answers edited in the submission's config: the hash no longer matches. In a
    row without a query-set digest (an older harness's), or ``claimed`` in the row's digest too."""
    _edit_json(run / "config.json", lambda c: c.update(queries="0" * 16))
    config = json.loads((run / "config.json").read_text())
    digest = {"queries_digest": "0" * 16} if claimed else {}
    _edit_json(run / "row.json", lambda row: row.update(config_hash=stable_hash(config), **digest))
    if not claimed:
        _edit_json(run / "row.json", lambda row: row.pop("queries_digest"))


TAMPERING = {
    "row metric inflated": (_inflate_row, "per-query values average"),
    "per-query and row lie together": (_lie_everywhere, "does not match the rankings"),
    "rankings edited": (_swap_ranks, "does not match the rankings"),
    "config edited": (_change_params, "does not hash to the row's config_hash"),
    "evaluated queries differ": (_edited_answers, "queries evaluated differ"),
    "another query set claimed": (lambda run: _edited_answers(run, claimed=True), "is not the one evaluated"),
    "dataset not available": (_rehashed_unknown_dataset, "is not available"),
    "query set claimed otherwise": (
        lambda run: _edit_json(run / "row.json", lambda row: row.update(queries_digest="0" * 16)),
        "the row's queries differ from config.json",
    ),
    "per-query file missing": (lambda run: (run / "per_query.jsonl").unlink(), "per-query results missing"),
    "row not JSON": (lambda run: (run / "row.json").write_text("{"), "not readable JSON"),
    "schema violated": (
        lambda run: _edit_json(run / "row.json", lambda row: row["metrics"].update(mrr="high")),
        "schema: metrics.mrr",
    ),
    "unknown field": (lambda run: _edit_json(run / "row.json", lambda row: row.update(extra=1)), "schema: row"),
    "query count": (
        lambda run: _edit_json(run / "row.json", lambda row: row.update(num_queries=3)),
        "per_query.jsonl has 4 queries",
    ),
    "malformed per-query line": (
        lambda run: (run / "per_query.jsonl").write_text('{"qid": "one"}\n'),
        "per_query.jsonl:1: malformed",
    ),
}


@pytest.mark.parametrize("name", list(TAMPERING))
def test_tampered_runs_are_refused_and_the_leaderboard_is_unchanged(
    name: str, runs: dict[str, Path], tmp_path: Path
) -> None:
    board = tmp_path / "leaderboard"
    merge([runs["overlap-strict"]], board)
    before = _snapshot(board)
    tamper, reason = TAMPERING[name]
    copy = tmp_path / "submitted" / runs["overlap"].name
    shutil.copytree(runs["overlap"], copy)
    tamper(copy)
    results = _validate(copy, tmp_path)
    assert not results[0].ok
    assert reason in "; ".join(results[0].problems)
    with pytest.raises(HarnessError, match="merge refused") as caught:
        merge([copy, runs["overlap-strict"]], board)  # one bad run refuses the whole merge
    assert reason in str(caught.value) and "unchanged" in str(caught.value)
    assert _snapshot(board) == before
    with pytest.raises(HarnessError, match="do not validate"):
        bundle([copy], tmp_path / "out.tar.gz")
    assert not (tmp_path / "out.tar.gz").exists()


def _archive_with(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_tampered_or_unsafe_archives_are_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    archive = tmp_path / "good.tar.gz"
    bundle([runs["overlap"]], archive)
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
    board = tmp_path / "leaderboard"
    board.mkdir()
    cases = {
        "edited": ({**{k: v + b" " if k.endswith("per_query.jsonl") else v for k, v in members.items()}}, "checksum"),
        "extra file": ({**members, "runs/evil.sh": b"rm -rf /"}, "not listed in the manifest"),
        "no manifest": ({k: v for k, v in members.items() if k != "manifest.json"}, "no valid manifest.json"),
        "escaping path": ({**members, "../escape.txt": b"x"}, "not a readable submission archive"),
    }
    for label, (content, reason) in cases.items():
        bad = _archive_with(tmp_path / f"{label}.tar.gz", content)
        with pytest.raises(HarnessError, match=reason):
            merge([bad], board)
        assert list(board.iterdir()) == [], label
    assert not (tmp_path / "escape.txt").exists()
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(gzip.compress(b"not a tar file"))
    with pytest.raises(HarnessError, match="not a readable submission archive"):
        merge([garbage], board)


def test_conflicting_duplicate_is_refused_unless_superseded(runs: dict[str, Path], tmp_path: Path) -> None:
    board = tmp_path / "leaderboard"
    merge([runs["overlap"]], board)
    before = _snapshot(board)
    with pytest.raises(HarnessError, match="conflicting duplicates") as caught:
        merge([runs["overlap-min2"]], board)
    assert "retriever.params" in str(caught.value) and "--supersede" in str(caught.value)
    assert _snapshot(board) == before
    old_run = board / read_rows(board)[0].run_dir

    actions = merge([runs["overlap-min2"]], board, supersede=True)
    assert [a.kind for a in actions] == ["superseded"]
    old_row, new_row = actions[0].old, actions[0].row
    assert old_row is not None
    line = next(x for x in (board / "CHANGELOG.md").read_text().splitlines() if x.startswith("- superseded"))
    # the same data: the scores are comparable, old → new
    assert "not comparable" not in line
    assert f"hit@1 {100 * old_row.metrics['hit@1']:.2f} → {100 * new_row.metrics['hit@1']:.2f}" in line
    rows = read_rows(board)
    assert len(rows) == 1 and rows[0].retriever.params["min_overlap"] == 2
    assert not old_run.exists()  # the replaced row's per-query results go with it

    # within one submission: the same run twice, or two configurations under one name
    results = validate(collect(runs["overlap"], tmp_path / "a") + collect(runs["overlap"], tmp_path / "b"))
    assert results[0].ok and "duplicate" in results[1].problems[0]
    results = validate(collect(runs["overlap"], tmp_path / "c") + collect(runs["overlap-min2"], tmp_path / "d"))
    assert "conflict" in results[1].problems[0]
    with pytest.raises(HarnessError, match="conflict"):
        merge([runs["overlap"], runs["overlap-min2"]], tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()


def test_a_merge_that_fails_midway_leaves_nothing_behind(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.leaderboard.merge

    board = tmp_path / "leaderboard"
    merge([runs["overlap"]], board)
    before = _snapshot(board)

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(harness.leaderboard.merge, "_write_changelog", crash)
    with pytest.raises(OSError, match="disk full"):
        merge([runs["overlap-strict"]], board)
    assert _snapshot(board) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".merge")] == []  # no staging copy left


def test_cli_submit_validate_merge(runs: dict[str, Path], tmp_path: Path) -> None:
    cli_runner = CliRunner()
    archive = tmp_path / "sub.tar.gz"
    result = cli_runner.invoke(cli, ["submit", str(runs["overlap"]), str(runs["overlap-strict"]), "-o", str(archive)])
    assert result.exit_code == 0, result.output
    assert "2 runs" in result.output
    result = cli_runner.invoke(cli, ["leaderboard", "validate", str(archive), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert [r["ok"] for r in json.loads(result.output)] == [True, True]
    result = cli_runner.invoke(cli, ["leaderboard", "merge", str(archive), "--into", str(tmp_path / "lb")])
    assert result.exit_code == 0, result.output
    assert "added plain/test overlap " in result.output

    _inflate_row(runs["overlap"])
    result = cli_runner.invoke(cli, ["leaderboard", "validate", str(runs["overlap"])])
    assert result.exit_code == 1
    assert "FAIL" in result.output and "per-query values average" in result.output
    result = cli_runner.invoke(cli, ["submit", str(runs["overlap"]), "-o", str(tmp_path / "x.tar.gz")])
    assert result.exit_code == 2 and "do not validate" in result.output
    result = cli_runner.invoke(cli, ["leaderboard", "validate", str(tmp_path)])
    assert result.exit_code == 2 and "not a submission archive" in result.output
    result = cli_runner.invoke(cli, ["leaderboard", "validate", str(runs["overlap"] / "row.json")])
    assert result.exit_code == 2 and "a row alone cannot be checked" in result.output


@pytest.fixture
def only_fake_plugins(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> PluginManager:
    """The process-wide manager with the fake plugins alone, whatever else is installed."""
    monkeypatch.setenv("HARNESS_PLUGINS", "")
    reset_plugin_manager()
    return request.getfixturevalue("plain_plugins")


def test_run_submitted_merged_validated_compared_and_published(
    only_fake_plugins: PluginManager, runs: dict[str, Path], tmp_path: Path
) -> None:
    """The contributor's and the maintainer's commands in order, from ``./registry.yaml``."""
    cli_runner = CliRunner()

    def invoke(*args: str) -> str:
        result = cli_runner.invoke(cli, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    (tmp_path / "registry.yaml").write_text(REGISTRY % 1)
    metrics = "hit@1,recall@3,mrr"
    invoke("run", "--no-leaderboard", "--output", "cli-runs", "--metrics", metrics)
    invoke("run", "-r", "overlap-strict", "--no-leaderboard", "--output", "cli-runs", "--metrics", metrics)
    invoke("submit", "cli-runs", "-o", "plain.tar.gz")
    out = invoke("leaderboard", "merge", "plain.tar.gz", "--into", "board")
    assert "added plain/test overlap " in out and "added plain/test overlap-strict " in out
    assert "2 of 2 rows valid" in invoke("leaderboard", "validate", "board")
    rows = {r.retriever.name: r for r in read_rows(tmp_path / "board")}
    # the same configuration as the runs made through the API: same hash, same metrics
    for name in ("overlap", "overlap-strict"):
        made = LeaderboardRow.model_validate_json((runs[name] / "row.json").read_text())
        assert rows[name].config_hash == made.config_hash
        assert rows[name].metrics == made.metrics
    assert rows["overlap-strict"].metrics["mrr"] < rows["overlap"].metrics["mrr"]
    result = json.loads(
        invoke(
            "compare",
            str(tmp_path / "board" / rows["overlap"].run_dir),
            str(tmp_path / "board" / rows["overlap-strict"].run_dir),
            "--format",
            "json",
        )
    )
    difference = rows["overlap-strict"].metrics["mrr"] - rows["overlap"].metrics["mrr"]
    assert result[0]["difference"] == pytest.approx(difference)
    invoke("leaderboard", "publish", "--from", "board", "--out", "site")
    assert "overlap-strict" in (tmp_path / "site" / "markdown" / "plain-test.md").read_text()


def test_concurrent_merges_keep_both(runs: dict[str, Path], tmp_path: Path) -> None:
    import threading

    board = tmp_path / "leaderboard"
    errors: list[BaseException] = []

    def merge_one(run: Path) -> None:
        try:
            merge([run], board)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=merge_one, args=(runs[name],)) for name in ("overlap", "overlap-strict")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert {r.retriever.name for r in read_rows(board)} == {"overlap", "overlap-strict"}
    assert (board / "CHANGELOG.md").read_text().count("\n## ") == 2


def test_an_archive_over_the_size_limits_is_refused_before_extracting(
    runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.leaderboard.bundles as submission

    archive = tmp_path / "big.tar.gz"
    bundle([runs["overlap"]], archive)
    monkeypatch.setattr(submission, "MAX_MEMBER_BYTES", 100)  # the run's files are larger
    work = tmp_path / "work"
    with pytest.raises(HarnessError, match=r"refused before extracting: .* bytes \(limit 100\)"):
        collect(archive, work)
    assert not work.exists() or not any(work.rglob("*"))


def test_uses_and_queries_without_candidate_answers_are_verified(runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "tampered"
    shutil.copytree(runs["overlap"], run)
    row = json.loads((run / "row.json").read_text())
    row["queries_without_candidate_answers"] = 3
    (run / "row.json").write_text(json.dumps(row))
    [result] = validate(collect(run, tmp_path / "w1"))
    assert any("queries_without_candidate_answers: the row says 3, the dataset gives 0" in p for p in result.problems)
    row["queries_without_candidate_answers"] = 0
    row["uses"] = [{"name": "first", "plugin": "by-id", "params": {}, "version": "1", "package": None}]
    (run / "row.json").write_text(json.dumps(row))
    [result] = validate(collect(run, tmp_path / "w2"))
    assert any("the row's uses differ from config.json" in p for p in result.problems)


def test_withdraw_takes_rows_off_with_the_reason_in_the_changelog(runs: dict[str, Path], tmp_path: Path) -> None:
    board = tmp_path / "leaderboard"
    merge([runs["overlap"], runs["overlap-strict"]], board)
    result = CliRunner().invoke(
        cli,
        ["leaderboard", "withdraw", "overlap-strict", "--from", str(board), "--reason", "its index was built wrong"],
    )
    assert result.exit_code == 0, result.output
    assert [r.retriever.name for r in read_rows(board)] == ["overlap"]
    assert not list((board / "runs").rglob("overlap-strict-*"))
    changelog = (board / "CHANGELOG.md").read_text()
    assert "1 withdrawn" in changelog and "its index was built wrong" in changelog and changelog.count("\n## ") == 2
    assert json.loads((board / "leaderboard.json").read_text())[0]["retriever"]["name"] == "overlap"
    again = CliRunner().invoke(
        cli, ["leaderboard", "withdraw", "overlap-strict", "--from", str(board), "--reason", "x"]
    )
    assert again.exit_code == 2 and "nothing changed" in again.output
    assert all(r.ok for r in validate(collect(board, tmp_path / "w")))


# -- migration from row schema 1 ------------------------------------------------------------
class _ById(harness.Retriever):
    """A fake first stage: candidates in id order."""

    name = "by-id"

    class Options(harness.Options):
        reverse: bool = Field(False, description="highest id first")

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        self.ids = skb.candidate_ids[::-1] if self.options.reverse else skb.candidate_ids

    def search(self, queries, k, top_ranked=None):  # type: ignore[no-untyped-def]
        ids = self.ids[:k]
        return [harness.Ranking(ids, -np.arange(len(ids), dtype=float)) for _ in queries]


class _Flip(harness.Reranker):
    """A fake reranker whose ``max_tokens`` is derived from ``mode``, as the LLM reranker's is."""

    name = "flip"

    class Options(harness.Reranker.Options):
        mode: str = Field("pointwise", description="pointwise or listwise")
        max_tokens: int | None = Field(None, description="default: 8 pointwise, 64 listwise")

        @model_validator(mode="after")
        def _derive(self):  # type: ignore[no-untyped-def]
            if self.max_tokens is None:
                self.max_tokens = 8 if self.mode == "pointwise" else 64
            return self

    def rerank(self, queries, candidates, k):  # type: ignore[no-untyped-def]
        return [harness.Ranking(c.ids[::-1][:k], np.arange(len(c.ids), dtype=float)[:k][::-1]) for c in candidates]


class _FakePlugin:
    @harness.hookimpl
    def register_retrievers(self, register):  # type: ignore[no-untyped-def]
        register(_ById)
        register(_Flip)


MIGRATION_REGISTRY = """
datasets:
  plain: {plugin: plain, splits: [test]}
retrievers:
  ids: {plugin: by-id}
  ids-flipped: {plugin: flip, params: {first_stage: ids, candidates: 3}}
"""


def _schema_1(board: Path, row: LeaderboardRow) -> str:
    """Rewrite ``row`` of ``board`` (and its config.json) as the harness of row schema 1 wrote
    it: the first stage beside the retriever, candidates in config.json, derived defaults null."""
    data = row.model_dump(mode="json")
    run_dir = board / row.run_dir
    config = json.loads((run_dir / "config.json").read_text())
    data["schema_version"] = 1
    if data["uses"] and "first_stage" in data["retriever"]["params"]:
        params = data["retriever"]["params"]
        candidates = params.pop("candidates")
        params.pop("first_stage")
        params["max_tokens"] = None
        data["first_stage"], data["uses"] = data["uses"][0], data["uses"][1:]
        config = {
            "retriever": data["retriever"],
            "first_stage": data["first_stage"],
            "uses": data["uses"],
            "candidates": candidates,
            **{k: v for k, v in config.items() if k not in ("retriever", "uses")},
        }
    else:
        data["first_stage"] = None
        config["first_stage"] = None
    data["config_hash"] = stable_hash(config)
    new_dir = run_dir.with_name(f"{row.retriever.name}-{data['config_hash']}")
    run_dir.rename(new_dir)
    (new_dir / "config.json").write_text(json.dumps(config, indent=2))
    data["run_dir"] = new_dir.relative_to(board).as_posix()
    row_path(board, row).unlink()
    (row_path(board, row).parent / f"{row.retriever.name}-{data['config_hash']}.json").write_text(json.dumps(data))
    return data["config_hash"]


@pytest.fixture
def schema_1_board(plain_plugins: PluginManager, tmp_path: Path) -> tuple[Path, dict[str, LeaderboardRow]]:
    plain_plugins.register(_FakePlugin(), "fake-retrievers")
    registry = parse_registry(MIGRATION_REGISTRY, "migration.yaml")
    runner = Runner(plain_plugins, output_dir=tmp_path / "runs", device="cpu")
    board = tmp_path / "board"
    for name in ("ids", "ids-flipped"):
        spec = resolve(registry, plain_plugins, name, "plain", "test", 3, ["hit@1", "mrr"])
        merge([runner.run(spec).run_dir], board)
    current = {r.retriever.name: r for r in read_rows(board)}
    for row in current.values():
        _schema_1(board, row)
    return board, current


def test_a_schema_1_row_is_refused_with_the_command_that_migrates_it(schema_1_board) -> None:  # type: ignore[no-untyped-def]
    board, _ = schema_1_board
    with pytest.raises(HarnessError, match=r"schema-1 row .*`harness leaderboard migrate DIR`"):
        read_rows(board)
    result = CliRunner().invoke(cli, ["leaderboard", "validate", str(board)])
    assert result.exit_code == 1 and "harness leaderboard migrate" in result.output


def test_migrate_rewrites_schema_1_rows_as_a_run_today_records_them(schema_1_board, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    board, current = schema_1_board
    v1_files = sorted(p.name for p in (board / "rows").rglob("*.json"))
    result = CliRunner().invoke(cli, ["leaderboard", "migrate", str(board)])
    assert result.exit_code == 0, result.output
    assert "migrated 2 rows" in result.output
    rows = {r.retriever.name: r for r in read_rows(board)}
    # the reranker: first stage in its parameters and first in uses, the derived max_tokens
    # filled in; the same configuration hash as a run made now
    flipped = rows["ids-flipped"]
    assert flipped.schema_version == 2
    assert flipped.retriever.params == {"first_stage": "ids", "candidates": 3, "mode": "pointwise", "max_tokens": 8}
    assert [u.name for u in flipped.uses] == ["ids"]
    for name, row in rows.items():
        assert row.config_hash == current[name].config_hash
        assert row.model_dump(exclude={"timestamp"}) == current[name].model_dump(exclude={"timestamp"})
        config = json.loads((board / row.run_dir / "config.json").read_text())
        assert "first_stage" not in config and "candidates" not in config
    assert sorted(p.name for p in (board / "rows").rglob("*.json")) != v1_files
    assert sorted(p.name for p in (board / "runs").rglob("*") if p.parent.name == "test") == sorted(
        Path(r.run_dir).name for r in rows.values()
    )
    changelog = (board / "CHANGELOG.md").read_text()
    assert "2 migrated to row schema 2" in changelog and "max_tokens null → 8" in changelog
    assert all(r.ok for r in validate(collect(board, tmp_path / "w"))), "migrated rows validate"
    again = CliRunner().invoke(cli, ["leaderboard", "migrate", str(board)])
    assert again.exit_code == 0 and "every row is current" in again.output


def test_a_migration_that_cannot_resolve_a_row_changes_nothing(schema_1_board, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    board, _ = schema_1_board
    before = _snapshot(board)
    plugins = get_plugin_manager()
    plugins.unregister("fake-retrievers")
    result = CliRunner().invoke(cli, ["leaderboard", "migrate", str(board)])
    assert result.exit_code == 2 and "unknown retriever" in result.output and "is unchanged" in result.output
    assert _snapshot(board) == before


def test_rows_of_a_leaderboard_validate_alone(runs: dict[str, Path], tmp_path: Path) -> None:
    board = tmp_path / "leaderboard"
    merge([runs["overlap"], runs["overlap-strict"]], board)
    [file] = [p for p in (board / "rows").rglob("overlap-strict-*.json")]
    [result] = validate(collect(file, tmp_path / "w"))
    assert result.ok and result.row is not None and result.row.retriever.name == "overlap-strict"
    assert len(validate(collect(file.parent, tmp_path / "w2"))) == 2
    loose = tmp_path / "row.json"
    shutil.copyfile(file, loose)
    with pytest.raises(HarnessError, match="a row alone cannot be checked"):
        collect(loose, tmp_path / "w3")


def _without_new_fields(run: Path) -> None:
    """The row as a harness before provenance and query-set digests wrote it."""

    def strip(row: dict) -> None:
        row.pop("queries_digest")
        for info in [row["retriever"], row["dataset"], *row["uses"]]:
            info.pop("provenance")

    _edit_json(run / "row.json", strip)


def test_rows_without_provenance_or_query_digest_stay_valid(runs: dict[str, Path], tmp_path: Path) -> None:
    old = tmp_path / "old" / runs["overlap"].name
    shutil.copytree(runs["overlap"], old)
    _without_new_fields(old)
    [result] = _validate(old, tmp_path)
    assert result.ok, result.problems
    assert result.row is not None and result.row.queries_digest is None and result.row.retriever.provenance == {}
    board = tmp_path / "leaderboard"
    merge([old], board)
    merge([runs["overlap-strict"]], board)  # a new row beside an old one of the same data
    assert all(r.ok for r in _validate(board, tmp_path / "again"))


def test_rows_of_another_query_set_never_mix_with_a_dataset_and_split(
    plain_plugins: PluginManager, runs: dict[str, Path], tmp_path: Path
) -> None:
    # the same SKB and split name, another query set (a new version of the dataset's queries)
    edited = REGISTRY.replace(
        "{plugin: plain, splits: [test]}", '{plugin: plain, params: {queries: [[1, "kettle", [0]]]}}'
    )
    registry = parse_registry(edited % 1, "v2.yaml")
    runner = Runner(plain_plugins, output_dir=tmp_path / "v2", device="cpu")
    v2 = {name: runner.run(resolve(registry, plain_plugins, name)) for name in ("overlap", "overlap-strict")}
    old_row = json.loads((runs["overlap"] / "row.json").read_text())
    assert v2["overlap"].row.dataset_fingerprint == old_row["dataset_fingerprint"]
    assert v2["overlap"].row.queries_digest != old_row["queries_digest"]

    board = tmp_path / "leaderboard"
    merge([runs["overlap"], runs["overlap-strict"]], board)
    before = _snapshot(board)
    with pytest.raises(HarnessError, match="rows of different data under one dataset and split") as caught:
        merge([v2["overlap-strict"].run_dir], board, supersede=True)  # one row of two: the other would mix
    message = str(caught.value)
    assert f"queries {old_row['queries_digest']} vs {v2['overlap'].row.queries_digest}" in message
    assert "the leaderboard's overlap" in message and "replace every row of plain/test" in message
    assert _snapshot(board) == before
    # validating them together says so too
    results = validate(collect(runs["overlap"], tmp_path / "a") + collect(v2["overlap-strict"].run_dir, tmp_path / "b"))
    assert results[0].ok and "on other data than" in results[1].problems[0]
    # every row replaced at once: the new query set comes in whole
    merge([v2["overlap"].run_dir, v2["overlap-strict"].run_dir], board, supersede=True)
    assert {r.queries_digest for r in read_rows(board)} == {v2["overlap"].row.queries_digest}


def test_superseding_with_another_dataset_version_says_the_scores_are_not_comparable(
    plain_plugins: PluginManager, runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers import PlainDataset

    board = tmp_path / "leaderboard"
    merge([runs["overlap"], runs["overlap-strict"]], board)
    old = {r.retriever.name: r for r in read_rows(board)}
    # version 2 of the dataset, with another query set
    monkeypatch.setattr(PlainDataset, "version", "2")
    edited = REGISTRY.replace(
        "{plugin: plain, splits: [test]}", '{plugin: plain, params: {queries: [[1, "kettle", [0]]]}}'
    )
    registry = parse_registry(edited % 1, "v2.yaml")
    runner = Runner(plain_plugins, output_dir=tmp_path / "v2", device="cpu")
    v2 = [runner.run(resolve(registry, plain_plugins, name)).run_dir for name in ("overlap", "overlap-strict")]
    actions = merge(v2, board, supersede=True)
    assert [a.kind for a in actions] == ["superseded", "superseded"]
    new = {r.retriever.name: r for r in read_rows(board)}
    assert old["overlap"].dataset.version == "0" and new["overlap"].dataset.version == "2"

    lines = [x for x in (board / "CHANGELOG.md").read_text().splitlines() if x.startswith("- superseded")]
    assert len(lines) == 2
    for line in lines:
        name = line.split("**")[1]
        assert "(dataset 0 → 2, another query set; scores not comparable): " in line
        scores = line.split("scores not comparable): ")[1].split(" (run of ")[0]
        assert "→" not in scores  # no old → new between numbers of different data
        assert scores.startswith(f"hit@1 {100 * new[name].metrics['hit@1']:.2f}")
        assert f"{100 * old[name].metrics['hit@1']:.2f} →" not in line
