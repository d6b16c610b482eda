"""The synthesis-stage interface: one step of a query-synthesis pipeline.

STaRK synthesizes queries in stages (sample a relational requirement, extract textual
properties, fuse them into a query, filter the answers). Each stage is a plugin, registered
through ``register_synthesis_stages`` (a hook this plugin offers; see
:mod:`harness_synthesis.hookspecs`), that reads a list of drafts and returns a list of
drafts, so stages compose and can be replaced one at a time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import harness

if TYPE_CHECKING:
    from harness import SKB, Options


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
    """Base class for synthesis stages. Subclass, set ``name``, declare ``Options`` (a
    :class:`harness.Options` model) if it takes parameters, implement ``run``.

    Constructor keyword arguments are validated against ``Options`` into ``self.options``;
    ``params`` (all of them, defaults filled in) keys a resumed pipeline's saved output. A
    stage must be deterministic given its parameters, its input and ``seed``.
    """

    name: ClassVar[str]
    version: ClassVar[str] = "0"
    Options: ClassVar[type[Options]] = harness.Options

    def __init__(self, **params: Any) -> None:
        what = f"synthesis stage {getattr(self, 'name', '?')!r}"
        self.options = harness.parse_options(type(self).Options, params, what)

    @property
    def params(self) -> dict[str, Any]:
        """Every parameter with the value that runs (JSON types)."""
        return self.options.model_dump(mode="json")

    @abstractmethod
    def run(self, skb: SKB, drafts: Sequence[Draft], seed: int) -> list[Draft]:
        """Transform ``drafts``; may drop some (a filter) or create them (the first stage)."""
