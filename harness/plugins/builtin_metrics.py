"""The built-in metrics, registered through the same hook third-party metrics use."""

from __future__ import annotations

from harness.metrics import BUILTIN_METRICS
from harness.plugins import Register
from harness.plugins.hookspecs import hookimpl


@hookimpl
def register_metrics(register: Register) -> None:
    for metric in BUILTIN_METRICS:
        register(metric)
