"""STaRK for stark-harness: the Amazon, MAG and Prime SKBs and their query sets.

Datasets ``stark-amazon``, ``stark-mag`` and ``stark-prime`` read the official release in its
own layout (see :mod:`harness_stark.files`): from ``--data-dir`` / ``$STARK_DATA_DIR`` when
given, else from the Hugging Face hub. Splits: ``train``, ``val``, ``test`` (``test-0.1`` when
the release has it) over the synthesized queries, and ``human-generated``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness


@harness.hookimpl
def register_datasets(register: Any) -> None:
    register("harness_stark.datasets:StarkAmazon", name="stark-amazon")
    register("harness_stark.datasets:StarkMag", name="stark-mag")
    register("harness_stark.datasets:StarkPrime", name="stark-prime")


@harness.hookimpl
def register_presets(register: Any) -> None:
    register(Path(__file__).with_name("presets.yaml"))
