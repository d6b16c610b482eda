"""Submissions: bundling runs for the leaderboard, validating them, merging them in.

A run directory written by ``harness run`` holds everything needed to check its row::

    row.json  config.json  per_query.jsonl  run.trec (or run.trec.gz)

A submission (``harness submit``) is a gzip'd tar of such directories under ``runs/`` plus
``manifest.json``: the harness version, the environment that produced the runs and a SHA-256
of every file. The leaderboard keeps the same files for each row under
``runs/<dataset>/<split>/<row>/``, so a published row can be checked again at any time.

Validation trusts nothing a submission says about itself: the row must match the JSON
Schema; ``config.json`` must hash to the row's ``config_hash``; the per-query values must
average to the row's metrics; and the metrics are recomputed from the TREC run against the
gold answers of the dataset as installed here (its fingerprint must match the row's).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import platform
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from harness.errors import HarnessError
from harness.io import (
    atomic_write,
    clean_stale,
    exclusive,
    leaderboard_lock,
    replace_dir,
    stable_hash,
    temp_prefix,
    write_json,
)
from harness.leaderboard.rows import LeaderboardRow, json_schema, read_rows, row_path, run_dir_of, write_merged

MANIFEST = "manifest.json"
ARCHIVE_FORMAT = 1
RUN_FILES = ("row.json", "config.json", "per_query.jsonl")
TOLERANCE = 1e-9  # recomputed metrics are the same arithmetic on the same numbers


@dataclass
class RunEntry:
    """One row with the directory of its per-query results, as found in a submission."""

    source: str
    directory: Path | None
    data: Any = None
    error: str | None = None


@dataclass
class Validation:
    source: str
    row: LeaderboardRow | None = None
    problems: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)

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
        }


# -- finding runs --------------------------------------------------------------------------
def collect(path: str | Path, workdir: Path) -> list[RunEntry]:
    """The runs in ``path``: a submission archive (unpacked into ``workdir``), a run
    directory, a directory of run directories, or a leaderboard directory."""
    path = Path(path)
    if path.is_file() and path.suffix == ".json":
        raise HarnessError(
            f"{path}: a row alone cannot be checked; give its run directory (row.json beside per_query.jsonl "
            "and run.trec), a submission archive or the leaderboard directory"
        )
    if path.is_file():
        return _open_archive(path, workdir)
    if not path.is_dir():
        raise HarnessError(f"{path}: no such file or directory")
    if (path / "row.json").is_file():
        return [_run_entry(path, str(path))]
    if (path / "rows").is_dir():
        return _leaderboard_entries(path)
    runs = sorted(p for p in path.iterdir() if (p / "row.json").is_file())
    if runs:
        return [_run_entry(run, str(run)) for run in runs]
    raise HarnessError(
        f"{path}: not a submission archive, a run directory (with row.json) or a leaderboard (with rows/)"
    )


def run_files(directory: Path) -> dict[str, Path]:
    """The files of a run directory by role; the TREC run may be gzip-compressed."""
    files = {name: directory / name for name in RUN_FILES}
    trec = directory / "run.trec"
    files["run.trec"] = trec if trec.exists() else directory / "run.trec.gz"
    return files


def _run_entry(directory: Path, source: str) -> RunEntry:
    try:
        data = json.loads((directory / "row.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return RunEntry(source, directory, error=f"row.json is not readable JSON: {exc}")
    return RunEntry(source, directory, data)


def _leaderboard_entries(root: Path) -> list[RunEntry]:
    entries = []
    for file in sorted((root / "rows").rglob("*.json")):
        source = str(file)
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            entries.append(RunEntry(source, None, error=f"not readable JSON: {exc}"))
            continue
        run_dir = data.get("run_dir") if isinstance(data, dict) else None
        directory = run_dir_of(root, run_dir if isinstance(run_dir, str) else None)
        entries.append(RunEntry(source, directory, data))
    return entries


#: Limits on a submission archive, checked from its headers before anything is extracted
#: (a STaRK-Amazon run of 9,100 queries × 100 results is ~40 MB of TREC text).
MAX_MEMBER_BYTES = 512 << 20
MAX_TOTAL_BYTES = 2 << 30
MAX_MEMBERS = 10_000


def _open_archive(path: Path, workdir: Path) -> list[RunEntry]:
    try:
        with tarfile.open(path, "r:*") as archive:
            members = archive.getmembers()
            too_big = [m for m in members if m.size > MAX_MEMBER_BYTES]
            if too_big or len(members) > MAX_MEMBERS or sum(m.size for m in members) > MAX_TOTAL_BYTES:
                what = (
                    f"{too_big[0].name} is {too_big[0].size:,} bytes (limit {MAX_MEMBER_BYTES:,})"
                    if too_big
                    else f"{len(members):,} members, {sum(m.size for m in members):,} bytes "
                    f"(limits {MAX_MEMBERS:,} and {MAX_TOTAL_BYTES:,})"
                )
                raise HarnessError(f"{path}: refused before extracting: {what}")
            # The "data" filter refuses absolute paths, "..", links out of the tree and devices.
            archive.extractall(workdir, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise HarnessError(f"{path}: not a readable submission archive: {exc}") from None
    try:
        manifest = json.loads((workdir / MANIFEST).read_text(encoding="utf-8"))
        runs, files = manifest["runs"], manifest["files"]
        if manifest.get("format") != ARCHIVE_FORMAT or not isinstance(runs, list) or not isinstance(files, dict):
            raise ValueError(f"unsupported format {manifest.get('format')!r}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise HarnessError(f"{path}: no valid {MANIFEST} in the archive ({exc})") from None
    present = {p.relative_to(workdir).as_posix() for p in workdir.rglob("*") if p.is_file()} - {MANIFEST}
    if present - set(files):
        raise HarnessError(f"{path}: files not listed in the manifest: {sorted(present - set(files))[:5]}")
    if set(files) - present:
        raise HarnessError(f"{path}: files listed in the manifest are missing: {sorted(set(files) - present)[:5]}")
    for name, digest in files.items():
        if sha256(workdir / name) != digest:
            raise HarnessError(f"{path}: {name} does not match its checksum in the manifest (corrupt or edited)")
    entries = []
    for run in runs:
        directory = workdir / str(run)
        if not directory.is_dir() or workdir not in directory.resolve().parents:
            raise HarnessError(f"{path}: the manifest lists run {run!r}, which the archive does not hold")
        entries.append(_run_entry(directory, f"{path.name}:{run}"))
    return entries


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- validation ----------------------------------------------------------------------------
class _Datasets:
    """Datasets loaded once per (plugin, parameters) across the rows being checked."""

    def __init__(self, data_dir: str | None) -> None:
        self.data_dir = data_dir
        self.loaded: dict[str, Any] = {}

    def get(self, row: LeaderboardRow) -> tuple[Any, Any, Any]:
        from harness.run import dataset_from_row

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
    two configurations under one name for the same dataset and split)."""
    from jsonschema import Draft202012Validator

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
    return results


def _validate_entry(entry: RunEntry, checker: Any, datasets: _Datasets) -> Validation:
    result = Validation(entry.source)
    if entry.error:
        result.problems.append(entry.error)
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
        "retriever": row.retriever.model_dump(),
        "first_stage": row.first_stage.model_dump() if row.first_stage else None,
        "uses": [info.model_dump() for info in row.uses],
        "dataset": row.dataset.model_dump(),
        "skb": row.dataset_fingerprint,
        "split": row.split,
        "k": row.k,
        "sample": row.sample,
    }
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
    from harness.metrics import METRICS_VERSION, evaluate, hit_matrix, means, parse_metrics
    from harness.plugins import get_plugin_manager
    from harness.queries import sample
    from harness.run.checks import candidate_mask
    from harness.trec import read_run

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
    if stable_hash([[q.id, q.text, list(q.answer_ids)] for q in queries]) != config.get("queries"):
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


def summarize_failures(results: Iterable[Validation]) -> str:
    return "\n".join(f"  {r.source}: {'; '.join(r.problems)}" for r in results if not r.ok)


# -- bundling ------------------------------------------------------------------------------
def environment() -> dict[str, Any]:
    """Where the runs were made: interpreter, platform and every installed distribution."""
    packages = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            packages[name] = dist.version
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "packages": dict(sorted(packages.items(), key=lambda item: item[0].lower())),
    }


def bundle(
    run_dirs: Sequence[str | Path], out: str | Path, check: bool = True, data_dir: str | None = None
) -> dict[str, Any]:
    """Write the runs in ``run_dirs`` into one submission archive at ``out``; return its manifest.

    With ``check`` the runs are validated first, so a submission that would be refused is
    never written."""
    with tempfile.TemporaryDirectory() as work:
        entries = [e for i, path in enumerate(run_dirs) for e in collect(path, Path(work) / str(i))]
        entries = [e for e in entries if e.directory is not None]
        if not entries:
            raise HarnessError("submit: no runs found")
        if check:
            results = validate(entries, data_dir)
            if not all(r.ok for r in results):
                raise HarnessError("submit: these runs do not validate:\n" + summarize_failures(results))
        members: dict[str, Path] = {}
        runs = []
        for entry in entries:
            assert entry.directory is not None
            data = entry.data if isinstance(entry.data, dict) else {}
            name = "runs/" + _run_name(data, entry.directory)
            if name in runs:
                raise HarnessError(f"submit: {entry.source} is given twice")
            runs.append(name)
            for role, path in run_files(entry.directory).items():
                if not path.is_file():
                    raise HarnessError(f"submit: {entry.directory} has no {role}; run `harness run` again to write it")
                members[f"{name}/{path.name}"] = path
        from harness import __version__

        manifest = {
            "format": ARCHIVE_FORMAT,
            "created": datetime.now(UTC).isoformat(),
            "harness": __version__,
            "environment": environment(),
            "runs": runs,
            "files": {name: sha256(path) for name, path in sorted(members.items())},
        }
        payload = json.dumps(manifest, indent=2).encode("utf-8")
        with atomic_write(out, "wb") as handle, tarfile.open(fileobj=handle, mode="w:gz", compresslevel=6) as archive:
            _add_bytes(archive, MANIFEST, payload)
            for name, path in sorted(members.items()):
                _add_bytes(archive, name, path.read_bytes())
    return manifest


def _run_name(row: dict[str, Any], directory: Path) -> str:
    try:
        return f"{row['dataset']['name']}-{row['split']}-{row['retriever']['name']}-{row['config_hash']}".replace(
            "/", "_"
        )
    except (KeyError, TypeError):
        return directory.name


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    import io

    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))


# -- merging -------------------------------------------------------------------------------
@dataclass
class MergeAction:
    kind: Literal["added", "replaced", "superseded"]
    row: LeaderboardRow
    source: str
    old: LeaderboardRow | None = None

    def describe(self, metrics: int = 4) -> str:
        row = self.row
        head = f"{self.kind} `{row.dataset.name}/{row.split}` **{row.retriever.name}** (`{row.config_hash}`)"
        shown = list(row.metrics)[:metrics]
        if self.old is None:
            return head + ": " + ", ".join(f"{m} {100 * row.metrics[m]:.2f}" for m in shown)
        how = "same configuration" if self.kind == "replaced" else f"was `{self.old.config_hash}`"
        if self.old.metrics == row.metrics:
            changes = "metrics unchanged"
        else:
            changes = ", ".join(
                f"{m} {100 * self.old.metrics[m]:.2f} → {100 * row.metrics[m]:.2f}" if m in self.old.metrics else m
                for m in shown
            )
        dates = f"{self.old.timestamp:%Y-%m-%d} → {row.timestamp:%Y-%m-%d}"
        return f"{head}, {how}: {changes} (run of {dates})"


def merge(
    paths: Sequence[str | Path],
    into: str | Path,
    data_dir: str | None = None,
    supersede: bool = False,
) -> list[MergeAction]:
    """Validate the submissions in ``paths`` and add their rows to the leaderboard ``into``.

    A row whose configuration is already there replaces it; another configuration under the
    same name (same dataset and split) is refused unless ``supersede``. All or nothing: the
    new leaderboard is built beside the old one and swapped in at once, with a changelog entry.
    """
    into = Path(into)
    into.parent.mkdir(parents=True, exist_ok=True)
    with (
        exclusive(leaderboard_lock(into), f"waiting for another writer of {into}"),
        tempfile.TemporaryDirectory() as work,
    ):
        existing = read_rows(into) if (into / "rows").is_dir() else []
        entries = [e for i, path in enumerate(paths) for e in collect(path, Path(work) / str(i))]
        if not entries:
            raise HarnessError("merge: the submissions hold no runs")
        results = validate(entries, data_dir)
        if not all(r.ok for r in results):
            failed = sum(not r.ok for r in results)
            raise HarnessError(
                f"merge refused: {failed} of {len(results)} runs do not validate; {into} is unchanged\n"
                + summarize_failures(results)
            )
        actions = _plan(results, existing, supersede)
        directories = {r.source: e.directory for r, e in zip(results, entries, strict=True)}
        clean_stale(into)
        staging = Path(tempfile.mkdtemp(dir=into.parent, prefix=temp_prefix(into), suffix=".merge"))
        try:
            if into.exists():
                shutil.copytree(into, staging, dirs_exist_ok=True)
            for action in actions:
                directory = directories[action.source]
                assert directory is not None
                _apply(staging, action, directory)
            write_merged(staging)
            write_json(staging / "schema.json", json_schema())
            _write_changelog(staging, actions, paths)
            replace_dir(staging, into)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return actions


def _plan(results: Sequence[Validation], existing: Sequence[LeaderboardRow], supersede: bool) -> list[MergeAction]:
    by_key = {(r.dataset.name, r.split, r.retriever.name): r for r in existing}
    actions, conflicts = [], []
    for result in results:
        row = result.row
        assert row is not None
        old = by_key.get((row.dataset.name, row.split, row.retriever.name))
        if old is None:
            actions.append(MergeAction("added", row, result.source))
        elif old.config_hash == row.config_hash:
            actions.append(MergeAction("replaced", row, result.source, old))
        elif supersede:
            actions.append(MergeAction("superseded", row, result.source, old))
        else:
            changed = _config_difference(old, row)
            conflicts.append(
                f"  {result.source}: {row.dataset.name}/{row.split} already has {row.retriever.name!r} with "
                f"another configuration ({old.config_hash} vs {row.config_hash}: {changed}); give the new one "
                "another registry name, or pass --supersede to replace it"
            )
    if conflicts:
        raise HarnessError(
            "merge refused: conflicting duplicates; the leaderboard is unchanged\n" + "\n".join(conflicts)
        )
    return actions


def _config_difference(old: LeaderboardRow, new: LeaderboardRow) -> str:
    a, b = old.model_dump(mode="json"), new.model_dump(mode="json")
    keys = ("retriever", "first_stage", "uses", "dataset", "dataset_fingerprint", "k", "sample")
    changed = []
    for key in keys:
        if a[key] != b[key]:
            if isinstance(a[key], dict) and isinstance(b[key], dict):
                inner = sorted(k for k in a[key].keys() | b[key].keys() if a[key].get(k) != b[key].get(k))
                changed.append(f"{key}.{'/'.join(inner)}")
            else:
                changed.append(key)
    if a["versions"]["metrics"] != b["versions"]["metrics"]:
        changed.append("metric definitions")
    return ", ".join(changed) or "the evaluated queries"


def _apply(root: Path, action: MergeAction, source: Path) -> None:
    if action.old is not None:
        row_path(root, action.old).unlink(missing_ok=True)
        if action.old.run_dir and not Path(action.old.run_dir).is_absolute():
            old_run = (root / action.old.run_dir).resolve()
            if root.resolve() in old_run.parents:
                shutil.rmtree(old_run, ignore_errors=True)
    target_row = row_path(root, action.row)
    run_dir = Path("runs") / action.row.dataset.name / action.row.split / target_row.stem
    destination = root / run_dir
    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir(parents=True)
    files = run_files(source)
    shutil.copyfile(files["config.json"], destination / "config.json")
    shutil.copyfile(files["per_query.jsonl"], destination / "per_query.jsonl")
    if files["run.trec"].suffix == ".gz":
        shutil.copyfile(files["run.trec"], destination / "run.trec.gz")
    else:
        # mtime=0: the same run compresses to the same bytes, so git sees no change
        with files["run.trec"].open("rb") as src, gzip.GzipFile(destination / "run.trec.gz", "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
    row = action.row.model_copy(update={"run_dir": run_dir.as_posix()})
    write_json(target_row, row.model_dump(mode="json"))


CHANGELOG_TITLE = "# Leaderboard changelog\n\nOne entry per `harness leaderboard merge` or `withdraw`, newest first.\n"
_OLD_TITLES = ("# Leaderboard changelog\n\nOne entry per `harness leaderboard merge`, newest first.\n",)


def _prepend_changelog(root: Path, entry: list[str]) -> None:
    path = root / "CHANGELOG.md"
    old = path.read_text(encoding="utf-8") if path.exists() else CHANGELOG_TITLE
    title = next((t for t in (CHANGELOG_TITLE, *_OLD_TITLES) if old.startswith(t)), None)
    body = old[len(title) :] if title else "\n" + old
    with atomic_write(path) as handle:
        handle.write(CHANGELOG_TITLE + "\n".join(entry) + "\n" + body)


def withdraw(
    into: str | Path, retriever: str, reason: str, dataset: str | None = None, split: str | None = None
) -> list[LeaderboardRow]:
    """Take the rows of ``retriever`` (optionally one dataset / split) off the leaderboard,
    with their per-query results, and say why in the changelog. All or nothing, under the lock
    every writer of the leaderboard takes."""
    into = Path(into)
    if not reason.strip():
        raise HarnessError("withdraw: give the reason (--reason), it goes into the changelog")
    with exclusive(leaderboard_lock(into), f"waiting for another writer of {into}"):
        rows = [
            r
            for r in (read_rows(into) if (into / "rows").is_dir() else [])
            if r.retriever.name == retriever and dataset in (None, r.dataset.name) and split in (None, r.split)
        ]
        if not rows:
            raise HarnessError(f"withdraw: {into} has no row of {retriever!r} matching that; nothing changed")
        clean_stale(into)
        staging = Path(tempfile.mkdtemp(dir=into.parent, prefix=temp_prefix(into), suffix=".merge"))
        try:
            shutil.copytree(into, staging, dirs_exist_ok=True)
            for row in rows:
                row_path(staging, row).unlink(missing_ok=True)
                if row.run_dir and not Path(row.run_dir).is_absolute():
                    run = (staging / row.run_dir).resolve()
                    if staging.resolve() in run.parents:
                        shutil.rmtree(run, ignore_errors=True)
            write_merged(staging)
            entry = [f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {len(rows)} withdrawn", "", reason.strip(), ""]
            entry += [f"- withdrew {r.dataset.name}/{r.split} **{r.retriever.name}** `{r.config_hash}`" for r in rows]
            _prepend_changelog(staging, entry)
            replace_dir(staging, into)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return rows


def _write_changelog(root: Path, actions: Sequence[MergeAction], paths: Sequence[str | Path]) -> None:
    sources = []
    for p in paths:
        p = Path(p)
        sources.append(f"`{p.name}` (sha256 {sha256(p)[:12]})" if p.is_file() else f"`{p}`")
    counts = ", ".join(f"{sum(a.kind == k for a in actions)} {k}" for k in ("added", "replaced", "superseded"))
    entry = [f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {counts}", "", f"From {', '.join(sources)}.", ""]
    entry += [f"- {a.describe()}" for a in actions]
    _prepend_changelog(root, entry)
