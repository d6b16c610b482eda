"""For tests of other plugins: real Debian documents in a small, quick SKB."""

from __future__ import annotations

import numpy as np

import harness
from harness_debian.dataset import DebianDataset

__all__ = ["debian_slice"]


def debian_slice(step: int, count: int) -> harness.SKB:
    """Every ``step``-th of the Debian packages, ``count`` of them, as a text-only SKB (one node
    type, no edges, every node a candidate): real documents, quick to index."""
    skb = DebianDataset().load_skb()
    ids = skb.candidate_ids[::step][:count]
    return harness.SKB(
        name=f"debian-slice-{step}-{count}",
        node_type_names=["package"],
        node_types=np.zeros(len(ids)),
        names=[skb.names[i] for i in ids],
        fields=[skb.fields[i] for i in ids],
        edge_types=[],
        src=np.zeros(0),
        dst=np.zeros(0),
        edge_type=np.zeros(0),
    )
