"""The harness format's files written from an SKB: ``nodes.jsonl.xz``, ``edges.npz``, ``skb.json``.

Two compressions of the same content (``SKB.load`` reads both): the smallest files (xz preset 9,
edges deflated at the default level), what caches and shipped SKBs use; and ``fast``, for large
imports: xz preset 0 with JSON encoded while another thread compresses (lzma releases the GIL)
and edges deflated at level 1. On a million nodes (140 MB of JSON) preset 9 took over nine
minutes of a CPU, preset 0 about eight seconds, for a file 1.1-1.7x the size.
"""

from __future__ import annotations

import json
import lzma
import zipfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

#: nodes per block of JSON lines handed to the compressing thread
NODE_BLOCK = 20_000


def int_type(bound: int) -> type[np.signedinteger]:
    """The smallest of int16/int32/int64 holding ``0 .. bound``."""
    for dtype in (np.int16, np.int32):
        if bound <= np.iinfo(dtype).max:
            return dtype
    return np.int64


def _node_lines(skb: Any) -> Iterator[str]:
    """The nodes as JSON lines (type, name, fields), in blocks of ``NODE_BLOCK``."""
    encode = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps(..., ensure_ascii=False), made once
    node_types, names, fields = skb.node_types.tolist(), skb.names, skb.fields
    for start in range(0, skb.num_nodes, NODE_BLOCK):
        stop = min(start + NODE_BLOCK, skb.num_nodes)
        yield "".join(encode([node_types[i], names[i], dict(fields[i])]) + "\n" for i in range(start, stop))


def write_files(skb: Any, directory: Path, meta: dict[str, Any], fast: bool) -> None:
    """``skb``'s three files (an :class:`harness.SKB`; untyped here, as the module it is saved
    from imports this one) into ``directory`` (an existing, empty one)."""
    with lzma.open(directory / "nodes.jsonl.xz", "wb", preset=0 if fast else 9) as out:
        with ThreadPoolExecutor(1) as pool:  # encode the next block while this one compresses
            pending: Future[Any] | None = None
            for block in _node_lines(skb):
                if pending is not None:
                    pending.result()
                pending = pool.submit(out.write, block.encode("utf-8"))
            if pending is not None:
                pending.result()
    arrays = {
        "src": skb.src.astype(int_type(skb.num_nodes)),
        "dst": skb.dst.astype(int_type(skb.num_nodes)),
        "edge_type": skb.edge_type.astype(int_type(len(skb.edge_types))),
    }
    if fast:
        with zipfile.ZipFile(directory / "edges.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for key, array in arrays.items():
                with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, array, allow_pickle=False)
    else:
        np.savez_compressed(directory / "edges.npz", **arrays)
    text = json.dumps(meta, indent=2, ensure_ascii=False) + "\n"
    (directory / "skb.json").write_text(text, encoding="utf-8")
