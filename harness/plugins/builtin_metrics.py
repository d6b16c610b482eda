"""The built-in metrics, registered through the same hook third-party metrics use (the
families themselves, and how they relate to trec_eval and STaRK: ``metric_families``)."""

from __future__ import annotations

from typing import Any

from harness.plugins.hookspecs import hookimpl


@hookimpl
def register_metrics(register: Any) -> None:
    from harness.plugins.metric_families import BUILTIN_METRICS  # numpy loads when metrics are needed

    for metric in BUILTIN_METRICS:
        register(metric)
