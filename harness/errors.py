"""The one exception type the CLI turns into a clean, single-line error."""

from __future__ import annotations


class HarnessError(Exception):
    """A problem with the user's input or environment, reported without a traceback.

    Raise it with a message that names the thing at fault (file, entry, plugin, id)
    and, where possible, what to do about it.
    """
