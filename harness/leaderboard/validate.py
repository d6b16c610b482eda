"""Validating rows against their per-query results and the dataset installed here.

Validation trusts nothing a submission says about itself: the row must match the JSON
Schema; ``config.json`` must hash to the row's ``config_hash``; the per-query values must
average to the row's metrics; and the metrics are recomputed from the TREC run against the
gold answers of the dataset as installed here (its fingerprint, and the digest of the split's
queries, must match the row's).

Rows of one dataset and split compare only when they evaluated the same data: an SKB of
another fingerprint, or a query set of another digest (another version of the dataset under
the same name), is flagged (:func:`data_conflicts`), and ``harness leaderboard merge`` refuses
to put such rows beside each other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from harness.errors import HarnessError, require
from harness.io import stable_hash
from harness.leaderboard.bundles import RunEntry, run_files
from harness.leaderboard.evidence import after_metrics, check_seeded
from harness.leaderboard.rows import LeaderboardRow, json_schema, schema_problem
from harness.metrics import METRICS_VERSION, evaluate, means, parse_metrics
from harness.plugins import get_plugin_manager
from harness.queries import sample
from harness.run import dataset_from_row
from harness.run.checks import candidate_mask
from harness.run.record import queries_digest
from harness.run.scoring import hit_matrix
from harness.trec import read_run

TOLERANCE = 1e-9  # recomputed metrics are the same arithmetic on the same numbers


@dataclass
class Validation:
    source: str
    row: LeaderboardRow | None = None
    problems: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        row = self.row
        return {
            "source": self.source,
            "ok": self.ok,
            "dataset": row.dataset.name if row else None,
            "split": row.split if row else None,
            "retriever": row.retriever.name if row else None,
            "config_hash": row.config_hash if row else None,
            "problems": self.problems,
            "checks": self.checks,
            "stale": self.stale,
        }


class _Datasets:
    """Datasets loaded once per (plugin, parameters) across the rows being checked."""

    def __init__(self, data_dir: str | None) -> None:
        self.data_dir = data_dir
        self.loaded: dict[str, Any] = {}

    def get(self, row: LeaderboardRow) -> tuple[Any, Any, Any]:

        key = stable_hash([row.dataset.plugin, row.dataset.params])
        if key not in self.loaded:
            try:
                dataset = dataset_from_row(row.dataset, self.data_dir)
                self.loaded[key] = (dataset.load_skb(), dataset.load_queries(), None)
            except HarnessError as exc:
                self.loaded[key] = (None, None, str(exc))
            except Exception as exc:
                self.loaded[key] = (None, None, f"{type(exc).__name__}: {exc}")
        return self.loaded[key]


def validate(
    entries: Sequence[RunEntry], data_dir: str | None = None, schema: dict[str, Any] | None = None
) -> list[Validation]:
    """Check every entry; then refuse duplicates among them (same configuration twice, or
    two configurations under one name for the same dataset and split) and rows of one dataset
    and split that evaluated different data."""
    Draft202012Validator = require("jsonschema", "validating rows").Draft202012Validator

    checker = Draft202012Validator(schema or json_schema())
    datasets = _Datasets(data_dir)
    results = [_validate_entry(entry, checker, datasets) for entry in entries]
    seen: dict[tuple[str, str, str], Validation] = {}
    for result in results:
        if result.row is None:
            continue
        row = result.row
        key = (row.dataset.name, row.split, row.retriever.name)
        earlier = seen.setdefault(key, result)
        if earlier is result:
            continue
        assert earlier.row is not None
        if earlier.row.config_hash == row.config_hash:
            result.problems.append(f"duplicate: the same configuration is also in {earlier.source}")
        else:
            result.problems.append(
                f"conflict: {earlier.source} has another configuration of {row.retriever.name!r} on "
                f"{row.dataset.name}/{row.split} ({earlier.row.config_hash} vs {row.config_hash})"
            )
    checked = {r.source: r for r in results}
    for source, problem in data_conflicts([(r.source, r.row) for r in results if r.row is not None]):
        checked[source].problems.append(problem)
    return results


def data_conflicts(rows: Sequence[tuple[str, LeaderboardRow]]) -> list[tuple[str, str]]:
    """``(source, problem)`` for each row that evaluated other data than the first row of its
    dataset and split: another SKB (``dataset_fingerprint``), or another query set
    (``queries_digest``, compared where both rows record it; rows written before it was
    recorded have none)."""
    first: dict[tuple[str, str], tuple[str, LeaderboardRow]] = {}
    found = []
    for source, row in rows:
        key = (row.dataset.name, row.split)
        earlier_source, earlier = first.setdefault(key, (source, row))
        if earlier is row:
            continue
        differ = []
        if row.dataset_fingerprint != earlier.dataset_fingerprint:
            differ.append(f"SKB {earlier.dataset_fingerprint} vs {row.dataset_fingerprint}")
        if None not in (row.queries_digest, earlier.queries_digest) and row.queries_digest != earlier.queries_digest:
            differ.append(f"queries {earlier.queries_digest} vs {row.queries_digest}")
        if differ:
            found.append(
                (
                    source,
                    f"evaluated {row.dataset.name}/{row.split} on other data than {earlier_source} "
                    f"({', '.join(differ)}): rows of different data are not comparable; register one under "
                    f"another dataset name, or replace every row of {row.dataset.name}/{row.split}",
                )
            )
    return found


def _validate_entry(entry: RunEntry, checker: Any, datasets: _Datasets) -> Validation:
    result = Validation(entry.source)
    if entry.error:
        result.problems.append(entry.error)
        return result
    outdated = schema_problem(entry.data)
    if outdated:
        result.problems.append(outdated)
        return result
    errors = sorted(checker.iter_errors(entry.data), key=lambda e: [str(p) for p in e.absolute_path])
    for error in errors[:5]:
        where = ".".join(map(str, error.absolute_path)) or "row"
        result.problems.append(f"schema: {where}: {error.message}")
    if errors:
        return result
    try:
        row = LeaderboardRow.model_validate(entry.data)
    except ValidationError as exc:
        first = exc.errors()[0]
        result.problems.append(f"schema: {'.'.join(map(str, first['loc']))}: {first['msg']}")
        return result
    result.row = row
    result.checks.append("schema")
    if entry.directory is None:
        result.problems.append("no per-query results: the row names no run directory")
        return result
    if row.seeds is not None:  # each seed's run is checked like a row; the row from them
        result.checks += check_seeded(
            row, entry.directory, lambda e: _validate_entry(e, checker, datasets), result.problems, result.stale
        )
        return result
    files = run_files(entry.directory)
    missing = [name for name, path in files.items() if name != "row.json" and not path.is_file()]
    if missing:
        result.problems.append(f"per-query results missing from {entry.directory}: {', '.join(missing)}")
        return result
    config = _read_config(files["config.json"], result)
    per_query = _read_per_query(files["per_query.jsonl"], result)
    if config is None or per_query is None:
        return result
    _check_config(row, config, result)
    _check_per_query(row, per_query, result)
    if result.ok:
        _recompute(row, config, per_query, files["run.trec"], datasets, result)
    return result


def _read_config(path: Path, result: Validation) -> dict[str, Any] | None:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        result.problems.append(f"config.json is not readable JSON: {exc}")
        return None
    if not isinstance(config, dict):
        result.problems.append("config.json is not a JSON object")
        return None
    return config


def _read_per_query(path: Path, result: Validation) -> list[dict[str, Any]] | None:
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        result.problems.append(f"per_query.jsonl is not readable: {exc}")
        return None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not (
                isinstance(record["qid"], int)
                and isinstance(record["metrics"], dict)
                and all(isinstance(v, int | float) for v in record["metrics"].values())
                and isinstance(record["latency_ms"], int | float)
            ):
                raise TypeError("qid must be an integer, metrics numbers, latency_ms a number")
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            result.problems.append(f"per_query.jsonl:{number}: malformed record ({exc})")
            return None
        records.append(record)
    return records


def _check_config(row: LeaderboardRow, config: dict[str, Any], result: Validation) -> None:
    if stable_hash(config) != row.config_hash:
        result.problems.append(f"config.json does not hash to the row's config_hash {row.config_hash}")
        return
    claimed = {
        "retriever": row.retriever.configuration(),
        "uses": [info.configuration() for info in row.uses],
        "dataset": row.dataset.configuration(),
        "skb": row.dataset_fingerprint,
        "split": row.split,
        "k": row.k,
        "sample": row.sample,
    }
    if row.queries_digest is not None and not row.sample:
        claimed["queries"] = row.queries_digest  # the whole split was evaluated: the same digest
    differing = [key for key, value in claimed.items() if config.get(key) != value]
    if differing:
        result.problems.append(f"the row's {', '.join(differing)} differ from config.json")
    else:
        result.checks.append("configuration")


def _close(a: float, b: float, relative: float = 0.0) -> bool:
    return abs(a - b) <= TOLERANCE + relative * abs(b)


def _check_per_query(row: LeaderboardRow, records: list[dict[str, Any]], result: Validation) -> None:
    qids = [r["qid"] for r in records]
    if len(set(qids)) != len(qids):
        result.problems.append("per_query.jsonl lists a query more than once")
        return
    if len(records) != row.num_queries:
        result.problems.append(f"per_query.jsonl has {len(records)} queries, the row says {row.num_queries}")
        return
    for metric, value in row.metrics.items():
        if any(metric not in r["metrics"] for r in records):
            result.problems.append(f"per_query.jsonl lacks {metric} for some queries")
            continue
        mean = float(np.mean([r["metrics"][metric] for r in records]))
        if not _close(mean, value):
            result.problems.append(f"{metric}: the row says {value:.6f}, its per-query values average {mean:.6f}")
    latencies = np.asarray([r["latency_ms"] for r in records], dtype=np.float64)
    measured = {
        "mean_ms": float(latencies.mean()),
        "p50_ms": float(np.percentile(latencies, 50)),
        "p95_ms": float(np.percentile(latencies, 95)),
    }
    for name, value in measured.items():
        if not _close(value, getattr(row.latency, name), relative=1e-6):
            result.problems.append(
                f"latency {name}: the row says {getattr(row.latency, name):.4f}, per-query latencies give {value:.4f}"
            )
    if result.ok:
        result.checks.append("per-query means")


def _recompute(
    row: LeaderboardRow,
    config: dict[str, Any],
    records: list[dict[str, Any]],
    run_path: Path,
    datasets: _Datasets,
    result: Validation,
) -> None:

    if row.versions.metrics != METRICS_VERSION:
        result.problems.append(
            f"the row's metrics are definitions version {row.versions.metrics}; this harness computes version "
            f"{METRICS_VERSION} (run it again with this harness)"
        )
        return
    skb, query_set, error = datasets.get(row)
    if error is not None:
        result.problems.append(f"cannot recompute the metrics: dataset {row.dataset.name!r} is not available ({error})")
        return
    if skb.fingerprint != row.dataset_fingerprint:
        result.problems.append(
            f"the dataset installed here (fingerprint {skb.fingerprint}) is not the one evaluated "
            f"({row.dataset_fingerprint})"
        )
        return
    try:
        split = query_set.split(row.split)
    except (HarnessError, KeyError) as exc:
        result.problems.append(f"split {row.split!r}: {exc}")
        return
    if row.queries_digest is not None and queries_digest(split) != row.queries_digest:
        result.problems.append(
            f"the split {row.split!r} installed here (queries {queries_digest(split)}) is not the one evaluated "
            f"({row.queries_digest})"
        )
        return
    by_id = {q.id: q for q in split}
    qids = [r["qid"] for r in records]
    unknown = [q for q in qids if q not in by_id]
    if unknown:
        result.problems.append(f"queries not in {row.dataset.name}/{row.split}: {unknown[:5]}")
        return
    expected_ids = [q.id for q in (sample(split, row.sample, config.get("seed") or 0) if row.sample else split)]
    if qids != expected_ids:
        what = f"the seeded {row.sample:.0%} sample" if row.sample else "the whole split"
        result.problems.append(f"per_query.jsonl does not cover {what} ({len(qids)} vs {len(expected_ids)} queries)")
        return
    queries = [by_id[q] for q in qids]
    if queries_digest(queries) != config.get("queries"):
        result.problems.append("the queries evaluated differ from the dataset's (text or answers)")
        return
    try:
        # by score, as trec_eval reads it, and only if that is the order the ranks say
        rankings = read_run(run_path, order="checked")
    except HarnessError as exc:
        result.problems.append(f"the TREC run cannot be read unambiguously: {exc}")
        return
    extra = set(rankings) - {str(q) for q in qids}
    if extra:
        result.problems.append(f"the TREC run has queries that were not evaluated: {sorted(extra)[:5]}")
        return
    try:
        ranked = [np.asarray([int(d) for d in rankings.get(str(q), [])], dtype=np.int64) for q in qids]
    except ValueError as exc:
        result.problems.append(f"the TREC run has a document id that is not a node id ({exc})")
        return
    too_long = [q for q, r in zip(qids, ranked, strict=True) if len(r) > row.k]
    if too_long:
        result.problems.append(f"rankings longer than k={row.k} for queries {too_long[:5]}")
        return
    try:
        metrics = parse_metrics(list(row.metrics), get_plugin_manager().components.by_kind["metric"])
    except HarnessError as exc:
        result.problems.append(f"cannot recompute the metrics: {exc}")
        return
    hits, n_relevant = hit_matrix(ranked, [q.answer_ids for q in queries], candidate_mask(skb))
    without = int((n_relevant == 0).sum())
    if without != row.queries_without_candidate_answers:
        result.problems.append(
            f"queries_without_candidate_answers: the row says {row.queries_without_candidate_answers}, "
            f"the dataset gives {without}"
        )
    values = evaluate(metrics, hits, n_relevant)
    for name, recomputed in values.items():
        claimed = np.asarray([r["metrics"][name] for r in records])
        wrong = np.flatnonzero(np.abs(recomputed - claimed) > TOLERANCE)
        if len(wrong):
            i = int(wrong[0])
            result.problems.append(
                f"{name} does not match the rankings for {len(wrong)} queries "
                f"(first: query {qids[i]} claims {claimed[i]:.6f}, recomputed {recomputed[i]:.6f})"
            )
    for name, value in means(values).items():
        if not _close(value, row.metrics[name]):
            result.problems.append(f"{name}: the row says {row.metrics[name]:.6f}, recomputed {value:.6f}")
    if result.ok:
        result.checks.append(f"metrics recomputed from {len(qids)} rankings")
        after_metrics(row, config, records, ranked, queries, skb, run_path.parent, result)


def summarize_failures(results: Iterable[Validation]) -> str:
    return "\n".join(f"  {r.source}: {'; '.join(r.problems)}" for r in results if not r.ok)
