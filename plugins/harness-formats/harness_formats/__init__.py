"""Data in and out: ``harness import`` (node/edge tables, relational databases → an SKB and
its queries), ``harness export`` (any dataset → Hugging Face ``datasets``, BEIR, TREC qrels),
and the ``local`` dataset that runs what was imported (``--data-dir DIR``)."""

from __future__ import annotations

from typing import Any

import harness


@harness.hookimpl
def register_commands(cli: Any) -> None:
    from harness_formats.export import export
    from harness_formats.importer import import_command

    cli.add_command(export)
    cli.add_command(import_command)


@harness.hookimpl
def register_datasets(register: Any) -> None:
    from harness_formats.local import LocalDataset

    register(LocalDataset)
