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


def require(module: str, purpose: str, extra: str = "stark-harness[leaderboard]") -> ModuleType:
    """``module`` imported, or a :class:`HarnessError` saying which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise HarnessError(
            f"{purpose} needs {module.split('.')[0]}, which is not installed: pip install '{extra}'"
        ) from exc
