"""The one exception type the CLI turns into a clean, single-line error, and ``require``: an
optional dependency imported, or that error naming the extra that installs it."""

from __future__ import annotations

import importlib
from types import ModuleType


class HarnessError(Exception):
    """A problem with the user's input or environment, reported without a traceback.

    Raise it with a message that names the thing at fault (file, entry, plugin, id)
    and, where possible, what to do about it.
    """


class KeptWork(KeyboardInterrupt):
    """Ctrl-C inside a component that kept part of its work: raise it from the interrupt with
    ``kept``, one line a person reads (``"8,192 of 63,436 documents encoded and kept in …"``);
    the run's interrupt message says it, so a re-run is not mistaken for a start from zero."""

    def __init__(self, kept: str) -> None:
        super().__init__(kept)
        self.kept = kept


def require(module: str, purpose: str, extra: str = "stark-harness[leaderboard]") -> ModuleType:
    """``module`` imported, or a :class:`HarnessError` saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise HarnessError(
            f"{purpose} needs {module.split('.')[0]}, which is not installed: pip install '{extra}'"
        ) from exc
