"""The record of a run: the leaderboard row's format (a pydantic model; its JSON Schema is
``harness leaderboard schema``) and the environment it notes (hardware, versions).

Schema 2: a reranker is a composite like any other (its first stage is a parameter and the
first entry of ``uses``); every component records the parameters that ran, defaults resolved.
Added within schema 2, optional so that earlier rows stay valid: a component's ``provenance``
(what building it resolved, such as a hub id's commit; not hashed) and the row's
``queries_digest`` (the split's queries, so that rows of different query sets never mix);
``hardware.executor`` (a run on an executor's workers, such as Ray's; not hashed); ``health``
(the counters that show the system's own idea at work, and flags when it never ran) and
``seeds`` (a row averaged over training seeds, with each seed's metrics).
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from harness.io import stable_hash
from harness.machine import Hardware, hardware
from harness.metrics import METRICS_VERSION
from harness.training import TrainingInfo
from harness.version import __version__

if TYPE_CHECKING:
    from harness.queries import Query

SCHEMA_VERSION = 2


class ComponentInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="registry or plugin name")
    plugin: str = Field(description="component name registered by the plugin")
    params: dict[str, Any] = Field(default_factory=dict)
    version: str = Field(description="component version")
    package: str | None = Field(None, description="distribution that provided it")
    provenance: dict[str, Any] = Field(
        default_factory=dict,
        description="what building it resolved that the parameters do not say (a hub id's repository and commit); "
        "not part of the configuration hash",
    )
    #: the parameters the component is built with, when they differ from the recorded ones
    #: (credentials inside values, which are recorded as ***: harness.run.secrets); never serialised
    _runtime_params: dict[str, Any] | None = PrivateAttr(default=None)

    @property
    def runtime_params(self) -> dict[str, Any]:
        return self._runtime_params if self._runtime_params is not None else self.params

    def configuration(self) -> dict[str, Any]:
        """What ``config.json`` records of the component and the configuration hash covers: all
        but the provenance, which is known only once it is built."""
        return self.model_dump(exclude={"provenance"})


class Latency(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mean_ms: float
    p50_ms: float
    p95_ms: float
    batch_size: int = Field(description="queries per search call; latency is amortised per query")


class HealthFlag(BaseModel):
    model_config = ConfigDict(extra="forbid")
    component: str = Field(description="the part of the system that (almost) never ran")
    reason: str = Field(description="what the counters show, said to a reader")


class Health(BaseModel):
    """Whether the system's own idea ran: counters summed over the queries (recomputed by
    ``harness leaderboard validate`` from the per-query details) and the flags they raise."""

    model_config = ConfigDict(extra="forbid")
    counters: dict[str, float] = Field(default_factory=dict, description="summed over the queries")
    queries: int = Field(ge=0)
    first_stage: dict[str, float] | None = Field(
        None,
        description="a reranker's first stage's metrics on the same queries, at the reranked depth, beside the "
        "reranked ones",
    )
    flags: list[HealthFlag] = Field(
        default_factory=list,
        description="non-empty when the row's distinguishing component never (or almost never) ran",
    )


class MetricSpread(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mean: float
    std: float = Field(description="sample standard deviation over the seeds (ddof 1)")
    min: float
    max: float


class Seeds(BaseModel):
    """A row averaged over training seeds: each seed's run is a subdirectory of the row's run."""

    model_config = ConfigDict(extra="forbid")
    values: list[int] = Field(min_length=2)
    config_hashes: list[str] = Field(description="each seed's run's configuration hash, in the order of values")
    metrics: dict[str, MetricSpread]
    runs: list[str] = Field(description="each seed's run directory, relative to the row's run directory")


class Versions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    python: str
    harness: str
    metrics: str = Field(description="version of the metric definitions")
    torch: str | None = None
    numpy: str


class LeaderboardRow(BaseModel):
    """One evaluated configuration: what ran, on what, how well, how fast, where."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    retriever: ComponentInfo
    uses: list[ComponentInfo] = Field(
        default_factory=list, description="retrievers it builds on (a reranker's first stage first), recursively"
    )
    dataset: ComponentInfo
    dataset_fingerprint: str = Field(description="digest of the SKB evaluated")
    split: str
    queries_digest: str | None = Field(
        None,
        description="digest of the split's queries (ids, texts, answer ids; before any sample): rows of one dataset "
        "and split are comparable only when it and dataset_fingerprint are equal",
    )
    num_queries: int = Field(ge=0)
    queries_without_candidate_answers: int = Field(0, ge=0)
    sample: float | None = Field(None, description="fraction of the split evaluated (seeded)")
    k: int = Field(gt=0)
    metrics: dict[str, float]
    latency: Latency
    index_build_seconds: float
    total_seconds: float
    regime: Literal["zero-shot", "trained", "llm-at-query-time"]
    training: TrainingInfo | None = Field(
        None, description="for a trained retriever: the split and queries trained on, the checkpoint, the time"
    )
    usage: dict[str, Any] = Field(default_factory=dict, description="tokens, cost (USD), API calls")
    health: Health | None = Field(None, description="whether the system's own components ran")
    seeds: Seeds | None = Field(None, description="for a row averaged over training seeds: each seed's metrics")
    hardware: Hardware
    versions: Versions
    config_hash: str
    timestamp: datetime
    run_dir: str | None = Field(None, description="per-query results and TREC run, relative or absolute")


def queries_digest(queries: Sequence[Query]) -> str:
    """A stable digest of queries: their ids, texts and answer ids, in order."""
    return stable_hash([[q.id, q.text, list(q.answer_ids)] for q in queries])


def versions() -> Versions:
    try:
        torch_version: str | None = importlib.metadata.version("torch")
    except Exception:
        torch_version = None
    return Versions(
        python=platform.python_version(),
        harness=__version__,
        metrics=METRICS_VERSION,
        torch=torch_version,
        numpy=np.__version__,
    )


__all__ = [
    "SCHEMA_VERSION",
    "ComponentInfo",
    "Hardware",
    "Health",
    "HealthFlag",
    "Latency",
    "LeaderboardRow",
    "MetricSpread",
    "Seeds",
    "Versions",
    "hardware",
    "queries_digest",
    "versions",
]
