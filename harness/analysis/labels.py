"""Names for runs in tables: the retriever each ran, and what differs where two share one.

Run directories are named ``<dataset>-<split>-<retriever>-<hash>``; cut to a terminal's width
they all read ``debian-t…``. A label leads with what a reader compares (the retriever) and adds
only what tells two runs of the same retriever apart (split, seed, sample, a parameter), the
directory name last when nothing recorded differs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["run_labels"]

#: at most this many differing settings in a label; more reads worse than the directory name
MOST = 3
#: the settings a label names first, in this order; parameters after them by name
_FIRST = {"dataset": 0, "split": 1, "seed": 2, "train": 3, "sample": 4, "sample_seed": 5, "k": 6}


def _config(run: str | Path) -> dict[str, Any] | None:
    path = Path(run)
    file = path / "config.json" if path.is_dir() else path.parent / "config.json"
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # a run file of another tool: no configuration to read
        return None
    if isinstance(config, dict) and isinstance(config.get("seeds"), list) and config["seeds"] and path.is_dir():
        # a run over seeds: its first seed's run says what ran (the seeds differ only in the seed)
        first = _config(path / f"seed-{config['seeds'][0]}")
        return {**first, "seeds": config["seeds"]} if first else None
    return config if isinstance(config, dict) and isinstance(config.get("retriever"), dict) else None


def _settings(config: dict[str, Any]) -> dict[str, str]:
    """What a run's configuration says, flattened to ``key → value`` for telling runs apart."""
    retriever = config["retriever"]
    dataset: dict[str, Any] = config["dataset"] if isinstance(config.get("dataset"), dict) else {}
    found = {
        "dataset": str(dataset.get("name", "")),
        "split": str(config.get("split", "")),
        "sample_seed": str(config.get("seed")),
        "sample": str(config.get("sample")),
        "k": str(config.get("k")),
    }
    training: dict[str, Any] = config["training"] if isinstance(config.get("training"), dict) else {}
    for name, trained in training.items():  # the split and seed each trained retriever learned from
        if isinstance(trained, dict):
            prefix = "" if name == retriever.get("name") else f"{name}."
            found[f"{prefix}train"] = str(trained.get("split", ""))
            found[f"{prefix}seed"] = str(trained.get("seed", ""))
    params = retriever.get("params") if isinstance(retriever.get("params"), dict) else {}
    found |= {key: json.dumps(value, sort_keys=True) for key, value in params.items()}
    return found


def _name(config: dict[str, Any]) -> str:
    seeds = config.get("seeds")
    return str(config["retriever"].get("name")) + (f" ({len(seeds)} seeds)" if isinstance(seeds, list) else "")


def run_labels(runs: list[str]) -> list[str]:
    """One label per run, distinct where the runs are: ``bm25``, ``dense-ft (seed=1)``,
    ``bm25 (split=val)``; a run without a configuration is named by its file or directory."""
    configs = [_config(run) for run in runs]
    labels = [_name(config) if config else Path(run).name for run, config in zip(runs, configs, strict=True)]
    groups: dict[str, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        groups[label].append(index)
    for label, members in groups.items():
        if len(members) < 2:
            continue
        settings = [_settings(config) if (config := configs[i]) else {} for i in members]
        keys = sorted({key for s in settings for key in s}, key=lambda k: (k not in _FIRST, _FIRST.get(k, 0), k))
        differ = [key for key in keys if len({s.get(key) for s in settings}) > 1]
        for i, mine in zip(members, settings, strict=True):
            shown = ", ".join(f"{key}={mine.get(key, '–')}" for key in differ)
            labels[i] = f"{label} ({shown if differ and len(differ) <= MOST else Path(runs[i]).name})"
    # still the same (identical configurations, or run files of the same name): the path tells
    counts: dict[str, int] = defaultdict(int)
    for label in labels:
        counts[label] += 1
    return [f"{label} [{run}]" if counts[label] > 1 else label for label, run in zip(labels, runs, strict=True)]
