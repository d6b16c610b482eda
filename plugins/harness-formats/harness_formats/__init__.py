"""Data in and out: ``harness import`` (node/edge tables, relational databases → an SKB and
its queries), ``harness export`` (any dataset → Hugging Face ``datasets``, BEIR, TREC qrels),
and the ``local`` dataset that runs what was imported (``--data-dir DIR``)."""

from __future__ import annotations

from typing import Any

import harness


@harness.hookimpl
def register_commands(cli: Any) -> None:
    from harness_formats.importer import import_command  # click alone: the builders load when a command runs

    # export's module imports the SKB and numpy: it loads when `harness export` runs
    cli.add_command(
        harness.lazy_command(
            "export", "harness_formats.export:export", help="Write a dataset out: Hugging Face datasets, BEIR, TREC."
        )
    )
    cli.add_command(import_command)


@harness.hookimpl
def register_datasets(register: Any) -> None:
    register("harness_formats.local:LocalDataset", name="local")
