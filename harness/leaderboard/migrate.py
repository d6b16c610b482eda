"""Rewriting the rows of a curated leaderboard written with an older row schema.

Schema 1 → 2: a reranker's first stage was a separate ``first_stage`` field (and
``candidates`` a key of ``config.json``); it is now the reranker's ``first_stage`` and
``candidates`` parameters and the first entry of ``uses``. Every component's parameters are
filled in as the installed plugin resolves them (its ``Options``, derived defaults included),
so the row records what ran. The configuration hash changes with the configuration, so each
row file and run directory is renamed; per-query results and TREC runs are kept as they are.
All or nothing, under the leaderboard lock, with a ``CHANGELOG.md`` entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.io import stable_hash, write_json
from harness.leaderboard.merge import locked, prepend_changelog, staged
from harness.leaderboard.rows import SCHEMA_VERSION, LeaderboardRow, json_schema, row_path, run_dir_of, write_merged
from harness.plugins import get_plugin_manager
from harness.run.resolve import construct

#: config.json keys of schema 1 that schema 2 keeps in the reranker's parameters
_V1_CONFIG_ONLY = ("first_stage", "candidates")
#: config.json's keys in the order ``harness run`` writes them
_CONFIG_ORDER = ("retriever", "uses", "dataset", "skb", "queries", "split", "sample", "seed", "k", "metrics_version")


@dataclass
class Migration:
    row: LeaderboardRow
    old_hash: str
    #: per component, the parameters that were added or changed: ``name: key old → new``
    changes: list[str]

    def describe(self) -> str:
        row = self.row
        what = f"`{row.dataset.name}/{row.split}` **{row.retriever.name}**"
        head = f"migrated {what} `{self.old_hash}` → `{row.config_hash}`"
        return head + (f": {'; '.join(self.changes)}" if self.changes else "")


def migrate(into: str | Path, plugins: Any = None) -> list[Migration]:
    """Migrate every schema-1 row of the leaderboard ``into`` (and its run directory's
    ``config.json``) to the current schema; rows already current are left alone."""
    if plugins is None:
        plugins = get_plugin_manager()
    into = Path(into)
    if not (into / "rows").is_dir():
        raise HarnessError(f"{into}: not a leaderboard (no rows/ directory)")
    with locked(into):
        old = []
        for file in sorted((into / "rows").rglob("*.json")):
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise HarnessError(f"{file}: unreadable leaderboard row: {exc}") from None
            version = data.get("schema_version") if isinstance(data, dict) else None
            if version == 1:
                old.append((file.relative_to(into), data))
            elif version != SCHEMA_VERSION:
                raise HarnessError(f"{file}: schema version {version!r}: cannot migrate it to {SCHEMA_VERSION}")
        if not old:
            return []
        done = []
        with staged(into) as staging:
            for relative, data in old:
                try:
                    done.append(_migrate_row(staging, staging / relative, data, plugins))
                except HarnessError as exc:
                    raise HarnessError(f"{into / relative}: {exc}; {into} is unchanged") from None
            write_merged(staging)
            write_json(staging / "schema.json", json_schema())
            stamp = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
            entry = [f"\n## {stamp} — {len(done)} migrated to row schema {SCHEMA_VERSION}", ""]
            entry += [
                "Rerankers are composites: the first stage is the `first_stage` parameter and the first entry of "
                "`uses`; every component records its parameters as the installed plugin resolves them. The "
                "configuration hashes change; per-query results and TREC runs are unchanged.",
                "",
            ]
            entry += [f"- {m.describe()}" for m in done]
            prepend_changelog(staging, entry)
    return done


def _migrate_row(root: Path, file: Path, data: dict[str, Any], plugins: Any) -> Migration:
    old_run = run_dir_of(root, data.get("run_dir"))
    if old_run is None or not (old_run / "config.json").is_file() or root.resolve() not in old_run.resolve().parents:
        raise HarnessError("its run directory (with config.json) is not inside the leaderboard")
    config = json.loads((old_run / "config.json").read_text(encoding="utf-8"))
    retriever = dict(data["retriever"])
    uses = list(data.get("uses") or [])
    first = data.get("first_stage")
    if first:
        if "candidates" not in config:
            raise HarnessError("a reranker row whose config.json does not say how many candidates it reranked")
        retriever["params"] = {**retriever["params"], "first_stage": first["name"], "candidates": config["candidates"]}
        uses = [first, *uses]
    changes: list[str] = []
    retriever = _resolved(plugins, "retriever", retriever, data["retriever"]["params"], changes)
    uses = [_resolved(plugins, "retriever", info, info["params"], changes) for info in uses]
    dataset = _resolved(plugins, "dataset", data["dataset"], data["dataset"]["params"], changes)
    # a component's provenance is known once it is built: the row keeps it, the configuration not
    new_config = {
        "retriever": _configuration(retriever),
        "uses": [_configuration(info) for info in uses],
        "dataset": _configuration(dataset),
    }
    new_config |= {key: config[key] for key in _CONFIG_ORDER if key in config and key not in new_config}
    new_config |= {key: value for key, value in config.items() if key not in (*new_config, *_V1_CONFIG_ONLY)}
    fields = {key: value for key, value in data.items() if key != "first_stage"}
    fields |= {"schema_version": SCHEMA_VERSION, "retriever": retriever, "uses": uses, "dataset": dataset}
    fields["config_hash"] = stable_hash(new_config)
    row = LeaderboardRow.model_validate(fields)
    target = row_path(root, row)
    run_dir = Path("runs") / row.dataset.name / row.split / target.stem
    if (root / run_dir).exists() and (root / run_dir).resolve() != old_run.resolve():
        raise HarnessError(f"its migrated run directory {run_dir} is already taken")
    file.unlink()
    (root / run_dir).parent.mkdir(parents=True, exist_ok=True)
    old_run.rename(root / run_dir)
    write_json(root / run_dir / "config.json", new_config)
    row = row.model_copy(update={"run_dir": run_dir.as_posix()})
    write_json(target, row.model_dump(mode="json"))
    return Migration(row, str(data["config_hash"]), changes)


def _configuration(info: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in info.items() if key != "provenance"}


def _resolved(plugins: Any, kind: str, info: dict[str, Any], recorded: dict[str, Any], changes: list[str]) -> Any:
    """``info`` with its parameters as the installed plugin resolves them; what differs from
    the ``recorded`` ones goes into ``changes``. Version and package stay what ran."""

    params = construct(plugins, kind, info["name"], info["plugin"], info["params"]).info.params
    differ = [
        f"{key} {json.dumps(recorded[key]) if key in recorded else '(unset)'} → {json.dumps(params[key])}"
        for key in params
        if key not in recorded or recorded[key] != params[key]
    ]
    if differ:
        changes.append(f"{info['name']}: {', '.join(differ)}")
    return {**info, "params": params}
