"""stark-harness: evaluate retrieval on semi-structured knowledge bases.

The public interfaces a plugin implements:

* :class:`harness.dataset.Dataset` — an :class:`harness.skb.SKB` and a
  :class:`harness.queries.QuerySet`
* :class:`harness.retriever.Retriever` / :class:`harness.retriever.Reranker`
* :class:`harness.metrics.Metric`
* :class:`harness.synthesis.SynthesisStage`

and the hooks in :mod:`harness.hookspecs` that register them.
"""

__version__ = "0.1.0"
