"""DAQu's network: the query and attribute encoders' trainable parts and the graph-structured,
two-level set encoding of the metadata (Jeong et al., §3.2).

The base encoder (sentence-transformers) gives unit vectors; ``Enc_q`` and ``Enc_r`` are that
encoder followed by a residual linear map initialised to zero (so an untrained model is the base
encoder exactly) and L2 normalisation. The metadata representation::

    r_ij = Enc_r(value of column j in row i)
    R_j  = MEAN_i r_ij          (first level: the features of a column)
    q'   = MEAN_j R_j           (second level: the columns, over every table)
    q~   = λ q + (1 - λ) q'     (a query without metadata keeps q~ = q)

and a candidate's score is the cosine of ``q~`` and its document's (frozen) vector. With
``pooling="attention"`` each MEAN becomes a softmax-weighted sum whose weights the query
conditions (a bilinear form initialised to zero: it starts as the mean).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F


class Adapter(nn.Module):
    """``x ↦ normalise(x + W x + b)`` with ``W, b`` zero at first: the identity on unit vectors."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x + self.linear(x), dim=-1)


def segment_mean(x: torch.Tensor, segment: torch.Tensor, count: int) -> torch.Tensor:
    """The mean of the rows of ``x`` in each of ``count`` segments (zeros for an empty one)."""
    sums = x.new_zeros(count, x.shape[1]).index_add_(0, segment, x)
    sizes = torch.bincount(segment, minlength=count).clamp(min=1).to(x.dtype)
    return sums / sizes[:, None]


def segment_attention(x: torch.Tensor, logits: torch.Tensor, segment: torch.Tensor, count: int) -> torch.Tensor:
    """The softmax(``logits``)-weighted sum of the rows of ``x`` in each of ``count`` segments."""
    top = logits.new_full((count,), -torch.inf).scatter_reduce(0, segment, logits, "amax", include_self=True)
    weights = torch.exp(logits - top[segment])
    totals = logits.new_zeros(count).index_add_(0, segment, weights)
    weights = weights / totals[segment]
    return x.new_zeros(count, x.shape[1]).index_add_(0, segment, weights[:, None] * x)


class DAQu(nn.Module):
    """``Enc_q``, ``Enc_r`` and the set encoding; ``forward`` gives the queries' ``q~`` (unit vectors)."""

    def __init__(self, dim: int, lam: float, pooling: str = "mean") -> None:
        super().__init__()
        self.lam, self.pooling = lam, pooling
        self.query = Adapter(dim)
        self.attribute = Adapter(dim)
        if pooling == "attention":
            self.feature_attention = nn.Linear(dim, dim, bias=False)
            self.column_attention = nn.Linear(dim, dim, bias=False)
            nn.init.zeros_(self.feature_attention.weight)
            nn.init.zeros_(self.column_attention.weight)

    def metadata(
        self,
        q: torch.Tensor,
        features: torch.Tensor,
        column: torch.Tensor,
        column_query: torch.Tensor,
        grad: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``q'`` of each query (zeros without metadata) and whether it has metadata.

        ``features``: base vectors of every feature of the batch; ``column``: each feature's
        column (global, 0..C-1); ``column_query``: each column's query (0..B-1); ``grad``: the
        features whose encoding takes gradients (DAQu's training samples a few per column; the
        others enter ``q'`` detached)."""
        count = q.shape[0]
        columns = int(column_query.shape[0])
        has = torch.bincount(column_query, minlength=count) > 0
        if not columns:
            return q.new_zeros(q.shape), has
        r = self.attribute(features)
        if grad is not None:
            r = torch.where(grad[:, None], r, r.detach())
        if self.pooling == "attention":
            context = q[column_query]
            logits = (self.feature_attention(r) * context[column]).sum(-1)
            per_column = segment_attention(r, logits, column, columns)
            logits = (self.column_attention(per_column) * context).sum(-1)
            return segment_attention(per_column, logits, column_query, count), has
        return segment_mean(segment_mean(r, column, columns), column_query, count), has

    def forward(
        self,
        queries: torch.Tensor,
        features: torch.Tensor,
        column: torch.Tensor,
        column_query: torch.Tensor,
        grad: torch.Tensor | None = None,
    ) -> torch.Tensor:
        q = self.query(queries)
        q_meta, has = self.metadata(q, features, column, column_query, grad)
        combined = torch.where(has[:, None], self.lam * q + (1 - self.lam) * q_meta, q)
        return F.normalize(combined, dim=-1)


def state(network: nn.Module) -> dict[str, Any]:
    """A detached CPU copy of ``network``'s weights."""
    return {name: value.detach().cpu().clone() for name, value in network.state_dict().items()}
