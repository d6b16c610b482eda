"""A run: the registry, resolution of names to components, the runner and the run record.

Import from here (``from harness.run import Runner, resolve, load_registry``), not from the
modules, which may move.
"""

from harness.machine import resolve_device
from harness.run.record import SCHEMA_VERSION, ComponentInfo, LeaderboardRow
from harness.run.registry import Registry, load_registry, parse_registry
from harness.run.resolve import RunSpec, dataset_from_row, load_dataset, resolve
from harness.run.runner import CheckResult, Runner, RunOutcome

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
