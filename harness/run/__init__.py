"""A run: the registry, resolution of names to components, the runner and the run record.

Import from here (``from harness.run import Runner, resolve, load_registry``), not from the
modules, which may move. Names load on first use: reading rows (``harness leaderboard show``)
needs the record, not the runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.io import lazy_exports

#: public name -> module it lives in
_EXPORTS = {
    "resolve_device": "harness.machine",
    "SCHEMA_VERSION": "harness.run.record",
    "ComponentInfo": "harness.run.record",
    "LeaderboardRow": "harness.run.record",
    "Registry": "harness.run.registry",
    "load_registry": "harness.run.registry",
    "parse_registry": "harness.run.registry",
    "RunSpec": "harness.run.resolve",
    "dataset_from_row": "harness.run.resolve",
    "load_dataset": "harness.run.resolve",
    "CheckResult": "harness.run.runner",
    "Runner": "harness.run.runner",
    "RunOutcome": "harness.run.runner",
}

__all__ = [
    "SCHEMA_VERSION",
    "CheckResult",
    "ComponentInfo",
    "LeaderboardRow",
    "Registry",
    "RunOutcome",
    "RunSpec",
    "Runner",
    "dataset_from_row",
    "load_dataset",
    "load_registry",
    "parse_registry",
    "resolve",
    "resolve_device",
]


__getattr__ = lazy_exports("harness.run", _EXPORTS, globals())


# imported now: the submodule of the same name would otherwise shadow the function once loaded
from harness.run.resolve import resolve  # noqa: E402

if TYPE_CHECKING:
    from harness.machine import resolve_device
    from harness.run.record import SCHEMA_VERSION, ComponentInfo, LeaderboardRow
    from harness.run.registry import Registry, load_registry, parse_registry
    from harness.run.resolve import RunSpec, dataset_from_row, load_dataset
    from harness.run.runner import CheckResult, Runner, RunOutcome
