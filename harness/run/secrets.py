"""Keeping credentials out of what the harness writes.

Parameters end up in ``config.json``, leaderboard rows, the leaderboard itself and submission
bundles, so a parameter named like a credential (``api_key``, ``token``, ``password``…) is
refused: keys come from the environment. Credentials inside a URL
(``https://user:secret@host``) are allowed for the component that needs them but are
replaced by ``***`` in everything recorded and in error messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.errors import HarnessError

_SECRET_NAME = re.compile(
    r"^(.*[_-])?(api[_-]?key|secret|client[_-]?secret|password|passwd|token|access[_-]?token|auth[_-]?token"
    r"|credentials?|private[_-]?key|authorization)$",
    re.IGNORECASE,
)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.\-]*://)[^/\s@]+@", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with the credentials of every URL in it replaced by ``***``."""
    return _URL_CREDENTIALS.sub(r"\g<scheme>***@", text)


def check_no_secrets(params: Mapping[str, Any], where: str, path: str = "") -> None:
    """Refuse a parameter (at any depth) whose name says it holds a credential."""
    for key, value in params.items():
        name = f"{path}.{key}" if path else str(key)
        if _SECRET_NAME.match(str(key)) and value not in (None, ""):
            raise HarnessError(
                f"{where}: parameter {name!r} holds a credential; parameters are written to config.json, "
                "leaderboard rows and submissions, so give it through the environment instead "
                "(e.g. $OPENAI_API_KEY, $ANTHROPIC_API_KEY, $VOYAGE_API_KEY)"
            )
        if isinstance(value, Mapping):
            check_no_secrets(value, where, name)


def redacted(value: Any) -> Any:
    """``value`` (parameters: dicts, lists, strings) with URL credentials replaced by ``***``."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(v) for v in value]
    return value
