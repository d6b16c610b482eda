"""The embedded default SKB: Debian's package catalogue (bookworm, main, amd64).

A product-search world close to STaRK-Amazon: packages (the candidates) with summaries and
long descriptions, maintainers (brands), sections (categories), debtags (facets), and
package–package relations (depends, recommends, suggests, built from the same source).
The queries were written by hand in the manner of STaRK's human-generated queries. Two
versions ship, each with its dataset card: ``data/v2/README.md`` (the default) and
``data/v1/README.md``; see also ``harness_debian.queries``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import harness


@harness.hookimpl
def register_datasets(register: Any) -> None:
    register("harness_debian.dataset:DebianDataset", name="debian")


@harness.hookimpl
def register_presets(register: Any) -> None:
    register(Path(__file__).with_name("presets.yaml"))
