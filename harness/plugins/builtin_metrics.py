"""The built-in metrics, registered through the same hook third-party metrics use."""

from __future__ import annotations

from typing import Any

from harness.plugins.hookspecs import hookimpl


@hookimpl
def register_metrics(register: Any) -> None:
    from harness.metrics import BUILTIN_METRICS  # numpy loads when metrics are needed, not at start-up

    for metric in BUILTIN_METRICS:
        register(metric)
