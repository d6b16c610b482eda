"""What a run directory holds besides the resume log (``checks``): ``build.json``'s training
and provenance, what a run answered and cached before an interruption, and the run files
(``per_query.jsonl``, ``run.trec``, ``qrels.trec``) written at the end."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from harness.io import atomic_write
from harness.queries import Query
from harness.run.record import ComponentInfo
from harness.run.resolve import RunSpec
from harness.training import TrainingInfo
from harness.trec import write_qrels, write_run


def write_outputs(
    run_dir: Path,
    spec: RunSpec,
    queries: list[Query],
    ordered: list[dict[str, Any]],
    per_query: dict[str, np.ndarray],
    qrels: list[tuple[list[int], list[int]]],
) -> None:
    with atomic_write(run_dir / "per_query.jsonl") as out:
        for i, query in enumerate(queries):
            values = {name: float(v[i]) for name, v in per_query.items()}
            line = {"qid": query.id, "latency_ms": ordered[i]["latency_ms"], "metrics": values}
            if "details" in ordered[i]:
                line["details"] = ordered[i]["details"]
            out.write(json.dumps(line) + "\n")
    with atomic_write(run_dir / "run.trec") as out:
        for query, result in zip(queries, ordered, strict=True):
            write_run(out, str(query.id), map(str, result["ids"]), result["scores"], spec.retriever)
    # The gold answers as trec_eval reads them — candidates relevant (each once), other
    # answers judged not relevant so that a query without a candidate answer still counts —
    # so that `trec_eval -c qrels.trec run.trec` reproduces the row from the run directory.
    with atomic_write(run_dir / "qrels.trec") as out:
        write_qrels(
            out,
            [
                (str(q.id), map(str, relevant), map(str, other))
                for q, (relevant, other) in zip(queries, qrels, strict=True)
            ],
        )


def read_training(path: Path) -> TrainingInfo | None:
    """The training ``build.json`` recorded (a resumed run's row keeps it), or None."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("training")
        return TrainingInfo.model_validate(recorded) if recorded else None
    except (OSError, ValueError, AttributeError):
        return None


def read_provenance(path: Path) -> dict[str, dict[str, Any]] | None:
    """The provenance ``build.json`` recorded, or None when it recorded none (no build yet, a
    run directory of an older harness, a file cut short)."""
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("provenance")
    except (OSError, ValueError, AttributeError):
        return None
    return recorded if isinstance(recorded, dict) else None


def provenance_changed(
    run_dir: Path, before: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]], answered: int
) -> str:
    changes = []
    for name in sorted(before.keys() | now.keys()):
        old, new = before.get(name, {}), now.get(name, {})
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        changes += [f"{name}: {key} {old.get(key, '(none)')} → {new.get(key, '(none)')}" for key in keys]
    return (
        f"run {run_dir}: the model changed since this run began ({'; '.join(changes)}; a hub branch moved, or "
        f"another copy is cached), and its {answered} answered queries came from the old one. Run again with "
        "--fresh to start over with the model as it is now (pin a revision, org/name@COMMIT, to keep runs from moving)"
    )


def with_provenance(info: ComponentInfo, provenance: dict[str, dict[str, Any]]) -> ComponentInfo:
    found = provenance.get(info.name)
    return info.model_copy(update={"provenance": found}) if found else info


def answered(path: Path, wanted: set[int]) -> int:
    """How many of ``wanted`` the resume log answers (complete lines only; read, never cut)."""
    answered: set[int] = set()
    try:
        with path.open("rb") as log:
            for raw in log:
                if not raw.endswith(b"\n"):
                    break
                try:
                    qid = json.loads(raw).get("qid")
                except (ValueError, AttributeError):
                    break
                if qid in wanted:
                    answered.add(qid)
    except OSError:
        return 0
    return len(answered)


def written_since(cache_dir: Path, since: float) -> list[str]:
    """The cache entries (directories, relative to ``cache_dir``) holding files written since
    ``since``: what this run added. Locks, digest memos and unfinished temporaries left out."""
    directories: set[Path] = set()
    for root, dirs, files in os.walk(cache_dir):
        relative = Path(root).relative_to(cache_dir)
        skipped = {"digests"} if relative == Path(".") else set()
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.endswith(".tmp") and d not in skipped]
        if len(relative.parts) >= 3:
            # entries live at most two levels down (<plugin>/<entry>); below that, the
            # directory's own time says enough, and a large answer cache is not walked file by file
            dirs[:] = []
            if os.stat(root).st_mtime >= since:
                directories.add(relative)
            continue
        for name in files:
            if name.startswith(".") or relative == Path("."):
                continue
            try:
                if os.stat(os.path.join(root, name)).st_mtime >= since:
                    directories.add(relative)
            except OSError:
                continue
    # an entry, not each subdirectory of it
    entries = [d for d in directories if not any(other in d.parents for other in directories)]
    return sorted(str(d) for d in entries)


def interrupted_message(
    described: str,
    active: tuple[Path, set[int]] | None,
    cache_dir: Path,
    since: float,
    again: str,
    kept: str | None = None,
) -> str:
    """What a Ctrl-C leaves behind: the answered queries a re-run resumes from (``active``: the
    run directory and the queries it wants), what the component under way kept of its build
    (``kept``, from :class:`harness.KeptWork`), what the run cached since ``since``."""
    lines = [f"interrupted: {described}"]
    if kept:
        lines.append(f"kept: {kept}")
    if active is not None:
        run_dir, wanted = active
        done = answered(run_dir / "results.jsonl", wanted)
        if done:
            lines.append(
                f"kept: {done} of {len(wanted)} queries answered, in {run_dir / 'results.jsonl'}; "
                f"{again} to resume (they are not searched again)"
            )
        else:
            lines.append(f"no query was answered yet; {again} to {'go on' if kept else 'start'} ({run_dir})")
    else:
        lines.append(f"no query was answered yet; {again} to {'go on' if kept else 'start'}")
    written = written_since(cache_dir, since)
    if written:
        shown = ", ".join(written[:6]) + (f" and {len(written) - 6} more" if len(written) > 6 else "")
        lines.append(
            f"cached by this run under {cache_dir}: {shown} (the next run reuses what was finished; "
            "an entry left unfinished is built again)"
        )
    else:
        lines.append(f"nothing new was cached by this run; earlier caches stay under {cache_dir}")
    return "\n".join(lines)
