"""The hook this plugin offers other plugins (added to the harness through ``add_hookspecs``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import harness


@harness.hookspec
def register_synthesis_stages(register: Callable[[type[Any]], None]) -> None:
    """Register :class:`harness_synthesis.stage.SynthesisStage` subclasses: ``register(MyStage)``."""
