"""The testing kit: everything a plugin's tests need from the harness, first-party or not.

::

    from harness.testing import check_retriever

    def test_my_retriever_keeps_the_contract(tmp_path):
        check_retriever(MyRetriever, {"depth": 5}, tmp_path)

Data (``harness.testing.data``)
    :func:`tiny_skb` (five products, two brands, shaped like real data), the ``tiny`` dataset
    over it (:class:`TinyDataset`) and ``tiny-train`` with train/val/test splits for trained
    retrievers (:class:`TinyTrainDataset`); :func:`star_skb` (a hub of any degree).
Plugins (``harness.testing.components``)
    :func:`plugin_manager` (the built-ins, the tiny datasets and your plugins),
    :func:`installed_plugins` (the process-wide manager, afresh), :class:`OverlapRetriever`
    (a trivial first stage to put under a reranker), :class:`Components`.
Runs (``harness.testing.runs``)
    :func:`run_retriever` (a retriever class with parameters on the tiny dataset),
    :func:`run` (a registry entry on any dataset, with any runner setting): both go through the
    real resolver and runner and return the outcome (``.row``, ``.run_dir``, ``.notes``);
    :func:`registry` and :func:`recorded_params` (the presets a plugin ships, what a row records
    for one); :func:`score` (the metrics a run computes); :func:`invoke` (the ``harness``
    command, in this process); :func:`run_concurrently` (a script in several processes at once).
Contracts (``harness.testing.checks``)
    :func:`check_retriever` runs a retriever twice on the tiny dataset (the second run reads
    what the first cached) and checks every ranking: sorted best first, candidate ids without
    repeats, at most ``k``, the same both times. :func:`check_training_resumes` checks that a
    trained retriever resumes an interrupted training exactly; :func:`entry_problem` that a
    cache entry is intact.
Dependencies and references (``harness.testing.references``, ``harness.testing.trec``)
    :func:`require` imports an optional dependency or skips, and fails instead under
    ``HARNESS_REQUIRE_REFERENCES=1``; the official STaRK code, pytrec_eval and ir_measures;
    :func:`check_run_dir` scores a run directory again with trec_eval's implementations.
Servers (``harness.testing.servers``)
    :func:`serve` runs a fake JSON API (:class:`JSONHandler`) on a free port of 127.0.0.1;
    :func:`hub_server` a fake Hugging Face hub.
"""

from __future__ import annotations

from harness.testing.checks import check_retriever, check_training_resumes, checkpoint_entry, entry_problem
from harness.testing.components import Components, OverlapRetriever, installed_plugins, plugin_manager
from harness.testing.data import TinyDataset, TinyTrainDataset, star_skb, tiny_skb
from harness.testing.references import (
    ir_measures,
    official_bm25,
    official_evaluator,
    official_skb_classes,
    pytrec_eval,
    require,
    stark_qa,
)
from harness.testing.runs import (
    invoke,
    recorded_params,
    registry,
    run,
    run_concurrently,
    run_retriever,
    sample_queries,
    score,
)
from harness.testing.servers import JSONHandler, hub_server, serve
from harness.testing.trec import check_run, check_run_dir

__all__ = [
    "Components",
    "JSONHandler",
    "OverlapRetriever",
    "TinyDataset",
    "TinyTrainDataset",
    "check_retriever",
    "check_run",
    "check_run_dir",
    "check_training_resumes",
    "checkpoint_entry",
    "entry_problem",
    "hub_server",
    "installed_plugins",
    "invoke",
    "ir_measures",
    "official_bm25",
    "official_evaluator",
    "official_skb_classes",
    "plugin_manager",
    "pytrec_eval",
    "recorded_params",
    "registry",
    "require",
    "run",
    "run_concurrently",
    "run_retriever",
    "sample_queries",
    "score",
    "serve",
    "star_skb",
    "stark_qa",
    "tiny_skb",
]
