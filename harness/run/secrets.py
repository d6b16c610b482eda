"""Keeping credentials out of what the harness writes and prints.

Parameters end up in ``config.json``, leaderboard rows, the leaderboard itself and submission
bundles, so a parameter named like a credential (``api_key``, ``token``, ``password``…) is
refused: keys come from the environment. A credential inside a value is allowed for the
component that needs it (the component is constructed with the real value) but is replaced by
``***`` in everything recorded, logged or printed, wherever it sits:

- a URL's user information, up to the last ``@`` before the host (a password may hold
  ``%40``): ``https://user:secret@host`` → ``https://***@host``;
- a query or fragment parameter named like a credential (``key``, ``api_key``, ``token``,
  ``sig``, ``X-Amz-Signature``, ``password``, ``passphrase``, ``session``…), also URL-encoded
  (a URL inside another URL's query): ``?api_key=sk-1`` → ``?api_key=***``,
  ``#access_token=…``; in prose ``token = "…"`` too. Names count as whole names:
  ``sort_key``, ``key_column`` and ``pad_token`` are not credentials;
- a header: ``Authorization: Bearer sk-1`` → ``Authorization: Bearer ***``, ``X-Api-Key: sk-1``,
  a bare ``Bearer sk-1``;
- a quoted key and its value, as JSON or a Python repr of a dict writes them
  (``"api_key": "sk-1"``), and, in a parameter, a mapping's entry named like a credential.

The replacement is always ``***`` (redacting twice changes nothing), so a configuration hash
over redacted parameters is as deterministic as one over the real values.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from harness.errors import HarnessError

#: what a credential is replaced by in everything recorded or printed
REDACTED = "***"

# Names that hold a credential, compared as whole names split into lower-case words
# (``X-Api-Key`` → x_api_key, ``accessToken`` → access_token), never as a word inside a longer
# name: ``sort_key``, ``key_column``, ``pad_token`` and ``max_tokens`` are not credentials.
#: a name ending in one of these is one (``openai_api_key``, ``X-Auth-Token``, ``db_password``)
_ENDINGS = frozenset(
    "api_key apikey access_token accesstoken auth_token authtoken refresh_token id_token session_token "
    "sessiontoken security_token client_secret clientsecret secret secret_key private_key privatekey access_key "
    "subscription_key password passwd passphrase credential credentials authorization".split()
)
#: whole names that are one wherever they stand (a parameter, a header, prose's ``token = …``)
_WHOLE = frozenset({"token", "pwd"})
#: more names, only in a URL's query or fragment and a header: how URLs carry keys, signatures
#: and sessions (``?key=``, ``&sig=``, ``X-Amz-Signature``); elsewhere they are ordinary words
_URL_WHOLE = frozenset("key sig signature auth session sessionid session_id cookie jwt pass".split())
_URL_ENDINGS = frozenset({"signature", "session_id"})
#: an environment variable's name (``HF_TOKEN=…``, ``STRIPE_KEY=…`` in a message)
_ENV_CREDENTIAL = re.compile(r"[A-Z][A-Z0-9_]*_(?:TOKEN|KEY)")
# %25 repeated: a URL encoded more than once (inside a URL inside a URL)
_PCT = r"%(?:25)*"
# A URL's user information runs to the last @ before the host, at the URL's own encoding level:
# a raw URL's password may hold ``%40``, a URL-encoded one's ``%2540``; in an encoded URL (inside
# another's query) a bare & or ; ends the outer value.
_URL_CREDENTIALS = re.compile(
    rf"(?P<scheme>\b[a-z][a-z0-9+.\-]*(?:://|(?P<pct>{_PCT})3a(?P=pct)2f(?P=pct)2f))"
    r"(?P<value>(?:(?(pct)(?!(?P=pct)(?:2f|3f|23|20)|[&;]))[^/?#\s\"'<>\\])+)"
    r"(?P<at>(?(pct)(?P=pct)40|@))",
    re.IGNORECASE,
)
# A query (or fragment: ``#access_token=…``) parameter: a separator (?, &, ;, # or their
# encodings, a quote, or the start of a word), a name, = (or %3D; in prose spaced too), its value up to
# the next separator, or what a quote opens up to the closing quote (``token = "…"``).
_QUERY = re.compile(
    rf"(?P<sep>^|[?&;#\s,(\[{{\"']|{_PCT}(?:3f|26|3b|23))"
    rf"(?P<name>(?:[a-z0-9_.\-]|{_PCT}(?:5f|2d|2e))+)"
    rf"(?P<eq>[ \t]*=[ \t]*|{_PCT}3d)"
    r"(?:\\?(?P<q>[\"']))?"
    rf"(?P<value>(?(q)(?:(?!\\?(?P=q))[^\n])+|(?:(?!{_PCT}(?:26|23|3b|20|22|27))[^&#;\s\"'<>\\\])}}])+))",
    re.IGNORECASE,
)
# A header line or a YAML-like ``name: value``; the name is checked by ``_header_name``.
_HEADER = re.compile(
    r"(?P<sep>(?<![\w-])(?P<name>[a-z][a-z0-9_-]*)\s*:[ \t]*(?P<q>[\"'])?"
    r"(?:(?:bearer|basic|token|digest|bot|apikey)[ \t]+)?)"
    r"(?P<value>(?(q)(?:(?!(?P=q))[^\n\\])+|[^\s\"',;]+))",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<sep>\bbearer[ \t]+)(?P<value>\*\*\*|[a-z0-9._~+/=\-]{4,})", re.IGNORECASE)
# A quoted name and its quoted value: JSON (``"api_key": "…"``) or a Python repr (``'token': '…'``).
_QUOTED = re.compile(
    r"(?P<sep>(?P<q>[\"'])(?P<name>[^\"'\s\\]{1,64})\\?(?P=q)\s*[:=]\s*(?P<v>\\?[\"']))"
    r"(?P<value>(?:(?!(?P=v))(?:\\.|[^\\\n]))*)",
)


def _words(name: str) -> list[str]:
    """A name's word parts: ``X-Amz-Signature`` → x, amz, signature; ``accessToken`` → access, token."""
    name = re.sub(r"%(?:25)*(5f|2d|2e)", "_", name, flags=re.IGNORECASE)
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [word for word in re.split(r"[_\-.\s]+", name.lower()) if word]


def _named(name: str, whole: frozenset[str], endings: frozenset[str]) -> bool:
    words = _words(name)
    tails = {sep.join(words[i:]) for i in range(len(words)) for sep in ("_", "")}
    return bool(tails & endings) or bool({"_".join(words), "".join(words)} & whole)


def credential_name(name: str) -> bool:
    """Whether a parameter, mapping key or prose ``name = …`` named ``name`` holds a credential:
    ``api_key``, ``token``, ``openai_api_key``, ``HF_TOKEN``; not ``pad_token`` or ``sort_key``."""
    name = str(name)
    return _named(name, _WHOLE, _ENDINGS) or bool(_ENV_CREDENTIAL.fullmatch(name))


def secret_name(name: str) -> bool:
    """Whether a query parameter or header named ``name`` holds a credential: also ``key``,
    ``sig``, ``session``, ``X-Amz-Signature``."""
    name = str(name)
    return credential_name(name) or _named(name, _WHOLE | _URL_WHOLE, _ENDINGS | _URL_ENDINGS)


def _header_name(name: str) -> bool:
    """Header-like names only: ``Authorization``, ``X-Api-Key``, ``api_key``, ``password``; not a
    bare ``key:`` in an error message (``unknown key: retriever``)."""
    return credential_name(name) or ("-" in name and secret_name(name)) or name.lower() == "cookie"


def _query_name(match: re.Match[str]) -> bool:
    # after ?, &, ; or # any credential-like name (``?key=``, ``&sig=``); in prose only a name
    # that could be nothing else (``api_key=…``, not ``KEY=VALUE`` in a usage message)
    in_url = match.group("sep")[-1:] in ("?", "&", ";", "#") or match.group("sep").startswith("%")
    return secret_name(match.group("name")) if in_url else credential_name(match.group("name"))


# Each pattern is tried at every position (inside a lookahead), so that a value holding another
# (a URL in a query parameter, JSON in a string) never hides the credential inside it.
_FINDERS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], bool]], ...] = (
    (re.compile(f"(?=(?:{_URL_CREDENTIALS.pattern}))", re.IGNORECASE), lambda m: True),
    (re.compile(f"(?=(?:{_QUERY.pattern}))", re.IGNORECASE), _query_name),
    (re.compile(f"(?=(?:{_QUOTED.pattern}))"), lambda m: _header_name(m.group("name"))),
    (re.compile(f"(?=(?:{_HEADER.pattern}))", re.IGNORECASE), lambda m: _header_name(m.group("name"))),
    (re.compile(f"(?=(?:{_BEARER.pattern}))", re.IGNORECASE), lambda m: True),
)


# every pattern needs one of these (``:`` of a scheme or header, ``=``, ``@``, an encoding's
# ``%``, or a bare ``Bearer``): most strings (names, texts) are passed over at once
_HINT = re.compile(r"[@=:%]|bearer", re.IGNORECASE)
# what stands for a credential in a message or an example, not one: ``export KEY=...``, ``$KEY``
_PLACEHOLDER = re.compile(r"(\.{2,}|…|\$\{?\w+\}?)[.,;:)]?")


def _spans(text: str) -> list[tuple[int, int]]:
    """Where the credentials in ``text`` are: merged ``(start, end)`` spans, in order."""
    found = sorted(
        match.span("value")
        for pattern, keep in _FINDERS
        for match in pattern.finditer(text)
        if match.group("value") and not _PLACEHOLDER.fullmatch(match.group("value")) and keep(match)
    )
    merged: list[tuple[int, int]] = []
    for start, end in found:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def redact(text: str) -> str:
    """``text`` with every credential in it (URL user information, credential-named query
    parameters, raw or URL-encoded, headers, quoted ``"api_key": "…"`` pairs) replaced by ``***``."""
    if not text or not _HINT.search(text):
        return text
    out, last = [], 0
    for start, end in _spans(text):
        out += [text[last:start], REDACTED]
        last = end
    return "".join([*out, text[last:]]) if out else text


def has_redactions(value: Any) -> bool:
    """Whether ``value`` (a string, or parameters at any depth) holds a credential that was
    redacted: recorded as ``***``, so that it cannot be used again as recorded."""
    if isinstance(value, str):
        return REDACTED in value and any(value[start:end] == REDACTED for start, end in _spans(value))
    if isinstance(value, Mapping):
        return any(
            (secret_name(str(k)) and v == REDACTED) or has_redactions(k) or has_redactions(v) for k, v in value.items()
        )
    if isinstance(value, list | tuple):
        return any(has_redactions(v) for v in value)
    return False


def check_runnable(where: str, params: Mapping[str, Any]) -> None:
    """Refuse to run recorded ``params`` in which a credential was redacted (``***``)."""
    redacted = [key for key, value in params.items() if has_redactions({key: value})]
    if redacted:
        raise HarnessError(
            f"{where}: the row records {redacted[0]!r} with its credentials removed (***); "
            "it cannot be re-run from what it records"
        )


def check_no_secrets(params: Mapping[str, Any], where: str, path: str = "") -> None:
    """Refuse a parameter (at any depth) whose name says it holds a credential."""
    for key, value in params.items():
        name = f"{path}.{key}" if path else str(key)
        if credential_name(str(key)) and value not in (None, ""):
            raise HarnessError(
                f"{where}: parameter {name!r} holds a credential; parameters are written to config.json, "
                "leaderboard rows and submissions, so give it through the environment instead "
                "(e.g. $OPENAI_API_KEY, $ANTHROPIC_API_KEY, $VOYAGE_API_KEY)"
            )
        if isinstance(value, Mapping):
            check_no_secrets(value, where, name)


_PLAIN = frozenset({int, float, bool, type(None)})


def redacted(value: Any, parent: str = "") -> Any:
    """``value`` (parameters, provenance, rows: dicts, lists, strings) with every credential in
    its strings replaced by ``***``, and the string value of a key named like a credential (in a
    ``headers`` mapping: any credential-like name, ``X-Goog-Signature`` say) too."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        headers = "header" in parent.lower()
        return {
            k: (
                REDACTED
                if isinstance(v, str) and v and (_header_name(str(k)) or (headers and secret_name(str(k))))
                else redacted(v, str(k))
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        if _PLAIN.issuperset(map(type, value)):  # ids, scores: nothing to redact (and quick to see)
            return list(value)
        return [redacted(v, parent) for v in value]
    return value


class RedactingFormatter(logging.Formatter):
    """A log formatter that redacts credentials (an HTTP client's INFO line names the URL it calls)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
