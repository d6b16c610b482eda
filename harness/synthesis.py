"""The synthesis-stage interface: one step of a query-synthesis pipeline.

STaRK synthesizes queries in stages (sample a relational requirement, extract textual
properties, fuse them into a query, filter the answers). Each stage is a plugin that
reads a list of drafts and returns a list of drafts, so stages compose and can be
replaced one at a time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.skb import SKB


@dataclass
class Draft:
    """A query under construction.

    Attributes:
        id: stable id, also the key a resumed pipeline skips on.
        text: the query so far ("" until a stage writes it).
        answer_ids: the current answer set (stages may narrow it).
        provenance: what each stage decided, keyed by stage name (templates, gold node,
            extracted properties, prompts, verdicts); written beside the query set.
    """

    id: int
    text: str = ""
    answer_ids: list[int] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)


class SynthesisStage(ABC):
    """Base class for synthesis stages. Subclass, set ``name``, implement ``run``.

    Constructor keyword arguments are the stage's parameters. A stage must be
    deterministic given its parameters, its input and ``seed``.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "0"

    def __init__(self, **params: Any) -> None:
        self.params = params

    @abstractmethod
    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        """Transform ``drafts``; may drop some (a filter) or create them (the first stage)."""
