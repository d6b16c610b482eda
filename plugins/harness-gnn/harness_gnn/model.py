"""The graph network (torch, torch-geometric): QA-GNN's message passing and a candidate scorer.

Follows ``modeling/modeling_qagnn.py`` of QA-GNN's public code in its parts: node vectors from
fixed text embeddings projected to the hidden size, the question (here the query) as a context
node projected from its sentence vector; each node's type (question entity, answer candidate,
other, context) and relevance score (a sinusoidal basis of the query–node similarity, QA-GNN's
``basis_f = 'sin'``) embedded and fed to every layer beside the node state; typed edges; L
layers; the output mixes the input and the last layer (``Vh(H) + Vx(X)``). QA-GNN's own layer
(``GATConvE``, attention whose keys and messages see an edge encoding of relation and end
types) is stood in for by torch-geometric's ``GATConv`` with a learned embedding of the
relation as the edge feature, or by ``RGCNConv``. The scorer reads a candidate with its context:
QA-GNN scores one (question, choice) graph by ``[pooled graph, sentence, context node]``; here a
query's candidates share one graph, so each is scored from ``[candidate, context, candidate ×
context]`` and its first-stage features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional

#: Per scored candidate, besides the node states: min-max normalised first-stage score, its
#: reciprocal rank, whether the first stage returned it, and the query–node similarity.
FEATURES = 4


@dataclass
class Batch:
    """Several queries' subgraphs as one disjoint graph (tensors on one device)."""

    text: torch.Tensor  # (N, text_dim): node document vectors; the query vector for context nodes
    is_context: torch.Tensor  # (N,) bool
    role: torch.Tensor  # (N,) long: ENTITY, CANDIDATE, OTHER, CONTEXT
    kind: torch.Tensor  # (N,) long: the SKB node type; num_node_types for context nodes
    relevance: torch.Tensor  # (N,) float: cosine of query and node (0 for context nodes)
    edge_index: torch.Tensor  # (2, E) long
    edge_type: torch.Tensor  # (E,) long
    scored: torch.Tensor  # (S,) long: the nodes scored
    graph: torch.Tensor  # (S,) long: the query each scored node belongs to
    slot: torch.Tensor  # (S,) long: its position among its query's scored nodes
    context: torch.Tensor  # (G,) long: each query's context node
    features: torch.Tensor  # (S, FEATURES) float
    gold: torch.Tensor  # (S,) bool

    def to(self, device: str) -> Batch:
        return Batch(**{name: value.to(device) for name, value in vars(self).items()})


class QAGNN(nn.Module):
    """Context node + typed message passing + candidate scorer."""

    basis: torch.Tensor  # a buffer (register_buffer below)

    def __init__(
        self,
        text_dim: int,
        num_relations: int,
        num_node_types: int,
        hidden: int = 128,
        layers: int = 2,
        conv: str = "gat",
        heads: int = 4,
        dropout: float = 0.2,
    ) -> None:
        from torch_geometric.nn import GATConv, RGCNConv

        super().__init__()
        half = hidden // 2
        self.conv_kind, self.num_relations, self.dropout = conv, num_relations, dropout
        self.node_in = nn.Linear(text_dim, hidden)  # QA-GNN's concept embedding projection
        self.context_in = nn.Linear(text_dim, hidden)  # QA-GNN's svec2nvec
        self.role = nn.Embedding(4, half)
        self.kind = nn.Embedding(num_node_types + 1, half)
        self.score = nn.Linear(half, half)
        self.register_buffer("basis", torch.pow(1.1, torch.arange(half, dtype=torch.float32)), persistent=False)
        self.extra = nn.Linear(3 * half, half)
        if conv == "gat":
            self.relation = nn.Embedding(num_relations + 1, hidden)  # the last: a node's edge to itself
            self.convs = nn.ModuleList(
                GATConv(hidden + half, hidden // heads, heads=heads, edge_dim=hidden, add_self_loops=False)
                for _ in range(layers)
            )
        else:
            bases = min(num_relations, 8)  # basis decomposition keeps many relations affordable
            self.convs = nn.ModuleList(
                RGCNConv(hidden + half, hidden, num_relations, num_bases=bases) for _ in range(layers)
            )
        self.vh = nn.Linear(hidden, hidden)
        self.vx = nn.Linear(hidden, hidden)
        self.head = nn.Sequential(
            nn.Linear(3 * hidden + FEATURES, hidden),
            nn.LayerNorm(hidden),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, 1),
        )

    def forward(self, batch: Batch) -> torch.Tensor:
        """A score per scored node (``batch.scored``)."""
        mask = batch.is_context.unsqueeze(1)
        h = functional.gelu(torch.where(mask, self.context_in(batch.text), self.node_in(batch.text)))
        basis = torch.sin(self.basis * batch.relevance.unsqueeze(1))
        extra = torch.cat([self.role(batch.role), self.kind(batch.kind), functional.gelu(self.score(basis))], dim=1)
        extra = functional.gelu(self.extra(extra))
        h = functional.dropout(h, self.dropout, self.training)
        x, edge_index, edge_type = h, batch.edge_index, batch.edge_type
        if self.conv_kind == "gat":
            loops = torch.arange(len(h), device=h.device)
            edge_index = torch.cat([edge_index, torch.stack([loops, loops])], dim=1)
            edge_type = torch.cat([edge_type, torch.full_like(loops, self.num_relations)])
        for conv in self.convs:
            inputs = torch.cat([x, extra], dim=1)
            if self.conv_kind == "gat":
                x = conv(inputs, edge_index, edge_attr=self.relation(edge_type))
            else:
                x = conv(inputs, edge_index, edge_type)
            x = functional.dropout(functional.gelu(x), self.dropout, self.training)
        out = functional.dropout(functional.gelu(self.vh(h) + self.vx(x)), self.dropout, self.training)
        candidate, context = out[batch.scored], out[batch.context[batch.graph]]
        return self.head(torch.cat([candidate, context, candidate * context, batch.features], dim=1)).squeeze(1)


def set_loss(scores: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Softmax cross-entropy over each query's scored candidates, the gold ones as one set:
    the mean over queries of ``-log(sum of the gold candidates' probabilities)``."""
    groups, width = len(batch.context), int(batch.slot.max()) + 1
    padded = torch.full((groups, width), float("-inf"), device=scores.device, dtype=scores.dtype)
    padded = padded.index_put((batch.graph, batch.slot), scores)
    gold = torch.full_like(padded, float("-inf")).index_put(
        (batch.graph, batch.slot), scores.masked_fill(~batch.gold, float("-inf"))
    )
    return (torch.logsumexp(padded, dim=1) - torch.logsumexp(gold, dim=1)).mean()


def state_to_numpy(model: nn.Module) -> dict[str, np.ndarray]:
    return {name: value.detach().cpu().numpy() for name, value in model.state_dict().items()}
