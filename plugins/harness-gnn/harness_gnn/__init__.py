"""A QA-GNN-style graph retriever for stark-harness.

* ``qagnn`` — QA-GNN (Yasunaga et al., 2021) adapted to retrieval over an SKB, as the STaRK
  paper's QAGNN baseline: query mentions linked to SKB nodes, the bounded k-hop subgraph around
  them and a first stage's candidates, the query as a context node, typed message passing
  (torch-geometric's GAT or R-GCN) and a scorer per candidate; trained on the train split.

Importing this module loads no model library: torch, torch-geometric and sentence-transformers
load when the retriever trains or builds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import harness


@harness.hookimpl
def register_retrievers(register: harness.Register) -> None:
    register("harness_gnn.retriever:QAGNNRetriever", name="qagnn")


@harness.hookimpl
def register_presets(register: Callable[[Path | str], None]) -> None:
    register(Path(__file__).with_name("presets.yaml"))
