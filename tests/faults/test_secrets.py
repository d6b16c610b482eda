"""Credentials inside values never reach what the harness writes or prints.

A retriever talking to a fake server on 127.0.0.1 is given planted secrets in its URL's user
information (after a ``%40`` in the password), its fragment (``#access_token=``), its query
string (raw and URL-encoded inside another parameter), header options and a JSON string; a
run, a failing run, ``harness submit``, a merge, a withdrawal (the changelog) and the commands
that print rows are then scanned: every file under the test's directory (runs, caches, bundle
members, leaderboards) and everything printed must hold none of the planted secrets in any
encoding, while the server saw each real value."""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import Field

import harness
from harness.run.secrets import (
    REDACTED,
    RedactingFormatter,
    check_no_secrets,
    check_runnable,
    has_redactions,
    redact,
    redacted,
)
from harness.testing import JSONHandler, OverlapRetriever, TinyDataset, invoke, serve
from harness.testing.components import Components, installed_plugins

USER_SECRET = "usrPw7Hf3kQ"
QUERY_SECRET = "qryK3yZ9x2M"
SIG_SECRET = "sigN4tR8e2W"
NESTED_SECRET = "encT0kR5tB7"
BEARER_SECRET = "brrP4mXq19L"
HEADER_SECRET = "hdrN2v6Yc0D"
JSON_SECRET = "jsnK8sQe3F5"
REASON_SECRET = "rsnL3qWp6Z1"
OTHER_SECRET = "othV5gHj8K2"
FRAGMENT_SECRET = "frgT6wQz4N8"
PLANTED = (
    USER_SECRET,
    QUERY_SECRET,
    SIG_SECRET,
    NESTED_SECRET,
    BEARER_SECRET,
    HEADER_SECRET,
    JSON_SECRET,
    REASON_SECRET,
    OTHER_SECRET,
    FRAGMENT_SECRET,
)


def variants(secret: str) -> set[bytes]:
    """The forms a planted secret could be written in: as is, URL-encoded (once, twice, as
    part of ``user:password``), base64 (Basic authentication), JSON-escaped, UTF-16."""
    forms = {secret, urllib.parse.quote(f"u:{secret}"), urllib.parse.quote(urllib.parse.quote(f"={secret}"))}
    forms.add(base64.b64encode(f"scanner:{secret}".encode()).decode())
    forms.add(json.dumps(secret)[1:-1])
    found = {form.encode() for form in forms} | {secret.encode("utf-16-le")}
    return found | {form.lower() for form in found}


def leaks(data: bytes, secrets: Sequence[str] = PLANTED) -> list[str]:
    """The planted secrets ``data`` holds, in any of their forms (case-insensitive)."""
    lowered = data.lower()
    return [s for s in secrets if any(form.lower() in lowered for form in variants(s))]


def scan(root: Path, printed: Sequence[str] = (), secrets: Sequence[str] = PLANTED) -> dict[str, list[str]]:
    """Every file under ``root`` (an archive's members too) and every printed text that holds
    a planted secret, with the secrets it holds."""
    found: dict[str, list[str]] = {}
    files = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    assert files, f"nothing written under {root}"
    for path in files:
        data = path.read_bytes()
        if hit := leaks(data, secrets):
            found[str(path.relative_to(root))] = hit
        if path.name.endswith((".tar.gz", ".tgz", ".tar")):
            with tarfile.open(path, "r:*") as archive:
                for member in archive.getmembers():
                    handle = archive.extractfile(member) if member.isfile() else None
                    if handle is not None and (hit := leaks(handle.read(), secrets)):
                        found[f"{path.name}!{member.name}"] = hit
    for i, text in enumerate(printed):
        if hit := leaks(text.encode(), secrets):
            found[f"<printed {i}>"] = hit
    return found


def excerpt(where: str, root: Path, printed: Sequence[str], secret: str) -> str:
    """The text around the first form of ``secret`` that ``where`` holds (for the failure message)."""
    if where.startswith("<printed"):
        data = printed[int(where[len("<printed ") : -1])].encode()
    elif "!" in where:
        archive, member = where.split("!", 1)
        with tarfile.open(root / archive, "r:*") as opened:
            handle = opened.extractfile(member)
            data = handle.read() if handle else b""
    else:
        data = (root / where).read_bytes()
    for form in variants(secret):
        at = data.lower().find(form.lower())
        if at >= 0:
            return repr(data[max(0, at - 120) : at + 40])
    return "?"


def assert_clean(root: Path, printed: Sequence[str], besides: frozenset[str] | set[str] = frozenset()) -> None:
    found = {where: hit for where, hit in scan(root, printed).items() if where not in besides}
    assert not found, "\n".join(
        f"{where}: {hit}\n  {excerpt(where, root, printed, hit[0])}" for where, hit in found.items()
    )


# -- the redaction itself --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://me:s3cr3t@host/v1", "https://***@host/v1"),
        ("https://tok3n@host/v1", "https://***@host/v1"),
        ("http://h/v1?api_key=s3cr3t", "http://h/v1?api_key=***"),
        ("http://h/v1?model=m&API-KEY=s3cr3t&n=2", "http://h/v1?model=m&API-KEY=***&n=2"),
        ("http://h/?key=s3cr3t#top", "http://h/?key=***#top"),
        ("http://h/?accessToken=s3cr3t;x=1", "http://h/?accessToken=***;x=1"),
        ("http://h/?password=a&passwd=b&pwd=c", "http://h/?password=***&passwd=***&pwd=***"),
        ("http://h/?sig=s3&sv=2020&se=2030", "http://h/?sig=***&sv=2020&se=2030"),
        ("http://h/?X-Amz-Signature=s3&X-Amz-Credential=AK%2F1", "http://h/?X-Amz-Signature=***&X-Amz-Credential=***"),
        ("http://h/?client_secret=s3&auth=t&credential=c", "http://h/?client_secret=***&auth=***&credential=***"),
        ("http://h/?api%5Fkey=s3cr3t", "http://h/?api%5Fkey=***"),
        ("http://h/?monkey=1&keyword=2&keys=3", "http://h/?monkey=1&keyword=2&keys=3"),  # not credentials
        # the user information runs to the last @: a password may hold %40 (%2540 when encoded)
        ("https://alice:p%40ssw0rd-s3cr3t@127.0.0.1:9/v1", "https://***@127.0.0.1:9/v1"),
        ("http://a@b@h/v1?q=x@y", "http://***@h/v1?q=x@y"),
        ("go=https%3A%2F%2Fme%3Ap%2540s3%40b%2Fx", "go=https%3A%2F%2F***%40b%2Fx"),
        # a fragment (OAuth's implicit flow), raw and encoded
        ("https://h/cb#access_token=s3&token_type=bearer", "https://h/cb#access_token=***&token_type=bearer"),
        (
            "?next=https%3A%2F%2Fh%2Fcb%23access_token%3Ds3%26x%3D1",
            "?next=https%3A%2F%2Fh%2Fcb%23access_token%3D***%26x%3D1",
        ),
        (
            "http://h/?passphrase=a&session=b&sessionid=c&session_id=d",
            "http://h/?passphrase=***&session=***&sessionid=***&session_id=***",
        ),
        # spaced and quoted values in prose
        ("token = s3cr3t and password = 'my pw'", "token = *** and password = '***'"),
        ('api_key="s3cr3t" and HF_TOKEN=hf_s3', 'api_key="***" and HF_TOKEN=***'),
        ('password: "my pw"', 'password: "***"'),
        # names are whole names: a parameter or column named after a key or a token is none
        ("http://h/?sort_key=name&key_column=id&pad_token=x", "http://h/?sort_key=name&key_column=id&pad_token=x"),
        ("{'pad_token': '<pad>', 'eos_token': '</s>'}", "{'pad_token': '<pad>', 'eos_token': '</s>'}"),
        ("go=https%3A%2F%2Fexample.org&contact=a%40b.org", "go=https%3A%2F%2Fexample.org&contact=a%40b.org"),
        # a URL inside another URL's query, encoded once and twice
        (
            "http://a/?next=http%3A%2F%2Fb%2F%3Ftoken%3Ds3cr3t%26x%3D1",
            "http://a/?next=http%3A%2F%2Fb%2F%3Ftoken%3D***%26x%3D1",
        ),
        (
            "?next=http%253A%252F%252Fb%252F%253Ftoken%253Ds3%2526x",
            "?next=http%253A%252F%252Fb%252F%253Ftoken%253D***%2526x",
        ),
        ("go=https%3A%2F%2Fme%3As3cr3t%40b%2Fx", "go=https%3A%2F%2F***%40b%2Fx"),
        # headers, in a header line, a curl command, a log line, a Python repr, JSON
        ("Authorization: Bearer s3cr3t", "Authorization: Bearer ***"),
        ("proxy-authorization: Basic dTpwdw==", "proxy-authorization: Basic ***"),
        ("curl -H 'X-Api-Key: s3cr3t' http://h", "curl -H 'X-Api-Key: ***' http://h"),
        ("sent Bearer s3cr3t.xyz to h", "sent Bearer *** to h"),
        ("{'Authorization': 'Bearer s3', 'n': 1}", "{'Authorization': '***', 'n': 1}"),
        ('{"X-Goog-Api-Key": "s3", "model": "m"}', '{"X-Goog-Api-Key": "***", "model": "m"}'),
        ('{"cfg": "{\\"api_key\\": \\"s3\\"}"}', '{"cfg": "{\\"api_key\\": \\"***\\"}"}'),
        ("password: s3cr3t", "password: ***"),
        ("api_key=s3cr3t given", "api_key=*** given"),
        # what is not a credential stays as it is
        ("error: -p sort: expected KEY=VALUE", "error: -p sort: expected KEY=VALUE"),
        ("unknown key: retriever", "unknown key: retriever"),
        ("export OPENAI_API_KEY=...; or api_key=$KEY", "export OPENAI_API_KEY=...; or api_key=$KEY"),  # placeholders
        ("mailto:me@example.org, http://h/?email=a@b.org", "mailto:me@example.org, http://h/?email=a@b.org"),
        ("postgresql://host/db?sslmode=require", "postgresql://host/db?sslmode=require"),
    ],
)
def test_redact_replaces_each_form_of_credential_and_nothing_else(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected  # stable: redacting twice changes nothing
    assert has_redactions(expected) == (expected != text)


def test_redacted_walks_values_and_redacts_secret_keys_of_headers() -> None:
    params = {
        "base_url": "http://u:pw@h/v1?api_key=k1",
        "headers": {"X-Request-Signature": "s1", "Accept": "application/json", "X-Api-Key": "k2"},
        "endpoints": ["http://h/?sig=s2", {"url": "http://h/?token=t1"}],
        "extra": '{"access_token": "t2"}',
        "n": 3,
        "flag": None,
    }
    out = redacted(params)
    assert out == {
        "base_url": "http://***@h/v1?api_key=***",
        "headers": {"X-Request-Signature": REDACTED, "Accept": "application/json", "X-Api-Key": REDACTED},
        "endpoints": ["http://h/?sig=***", {"url": "http://h/?token=***"}],
        "extra": '{"access_token": "***"}',
        "n": 3,
        "flag": None,
    }
    assert redacted(out) == out and has_redactions(out) and not has_redactions({"n": 3, "url": "http://h/?q=1"})
    assert harness.stable_hash(redacted(params)) == harness.stable_hash(
        redacted({**params, "base_url": "http://v:x@h/v1?api_key=k9"})
    )


def test_parameters_named_like_credentials_are_refused_without_echoing_the_value() -> None:
    for params in (
        {"api_key": "v4lue"},
        {"llm": {"token": "v4lue"}},
        {"headers": {"Authorization": "v4lue"}},
        {"openai_api_key": "v4lue"},
        {"passphrase": "v4lue"},
    ):
        with pytest.raises(harness.HarnessError, match="holds a credential") as caught:
            check_no_secrets(params, "retriever 'x'")
        assert "v4lue" not in str(caught.value)
    # not credentials: whole names count, not a word of a longer one
    check_no_secrets(
        {"keyword": "x", "max_tokens": 3, "api_key": None, "pad_token": "<pad>", "eos_token": "</s>", "sort_key": "id"},
        "retriever 'x'",
    )


def test_rows_with_key_named_query_parameters_stay_runnable() -> None:
    url = "http://h/v1?sort_key=name&key_column=id"
    assert redacted({"base_url": url, "pad_token": "<pad>"}) == {"base_url": url, "pad_token": "<pad>"}
    check_runnable("row", {"base_url": url, "pad_token": "<pad>"})
    with pytest.raises(harness.HarnessError, match="credentials removed"):
        check_runnable("row", {"base_url": redact("http://h/cb#access_token=t0k")})


def test_log_records_are_redacted() -> None:
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: GET %s", ("http://h/?key=s3",), None)
    assert RedactingFormatter("%(message)s").format(record) == "HTTP Request: GET http://h/?key=***"


# -- a run, a failing run, a submission, a merge, a withdrawal: scanned -----------------------


class Server(JSONHandler):
    """Answers GET with what it received; a path under /fail answers 500 echoing the request,
    as a proxy's error page does."""

    seen: ClassVar[list[dict[str, Any]]] = []

    def do_GET(self) -> None:
        request = {"path": self.path, "headers": dict(self.headers.items())}
        Server.seen.append(request)
        self.send_json(500 if self.path.startswith("/fail") else 200, {"received": request})


class Remote(harness.Retriever):
    """A lexical retriever that calls a server as it builds, with every place a plugin puts
    the URL and headers it was given: its provenance, its usage, its rankings' details, its
    logs and its errors."""

    name = "remote"
    version = "1"

    class Options(harness.Options):
        base_url: str = Field(..., description="the server, with credentials in it")
        headers: list[str] = Field(default_factory=list, description="extra request headers, 'Name: value'")
        extra: str = Field("", description="a free string (JSON)")

    options: Options

    def build(self, skb: harness.SKB, context: harness.BuildContext) -> None:
        parts = urllib.parse.urlsplit(self.options.base_url)
        headers = dict(line.split(": ", 1) for line in self.options.headers)
        if parts.password:  # what a client does with user information: Basic authentication
            basic = base64.b64encode(f"{parts.username}:{parts.password}".encode()).decode()
            headers["Proxy-Authorization"] = f"Basic {basic}"
        url = urllib.parse.urlunsplit(parts._replace(netloc=parts.hostname + f":{parts.port}"))
        logging.getLogger("httpx").info('HTTP Request: GET %s "HTTP/1.1 200 OK"', self.options.base_url)
        logging.getLogger("remote").warning("headers %s, extra %s", headers, self.options.extra)
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as reply:
                self.received = json.loads(reply.read())["received"]
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{self.options.base_url} with {headers} answered {exc.code}: {exc.read()!r}") from None
        self.inner = OverlapRetriever()
        self.inner.build(skb, context)

    def search(
        self, queries: Sequence[harness.Query], k: int, top_ranked: Sequence[harness.Ranking] | None = None
    ) -> list[harness.Ranking]:
        rankings = self.inner.search(queries, k)
        details = {"endpoint": self.options.base_url, "sent": self.options.headers, "extra": self.options.extra}
        return [harness.Ranking(r.ids, np.asarray(r.scores), details=details) for r in rankings]

    def provenance(self) -> dict[str, Any]:
        return {"endpoint": self.options.base_url, "headers": self.options.headers}

    def usage(self) -> dict[str, Any]:
        return {"requests": 1, "endpoint": self.options.base_url}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    monkeypatch.setenv("HARNESS_CACHE", str(tmp_path / "cache"))  # scanned too
    monkeypatch.setenv("HARNESS_PLUGINS", "")  # the tiny dataset and Remote only
    for name in ("HARNESS_VERBOSE", "TRANSFORMERS_VERBOSITY"):
        # set, then deleted: both undone after the test, so what --verbose sets in this process goes too
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    installed_plugins(Components([Remote], [TinyDataset]))
    Server.seen = []
    with serve(Server) as base:
        yield base
    root.handlers[:], _ = handlers, root.setLevel(level)  # --verbose added a console handler
    logging.getLogger("httpx").setLevel(logging.NOTSET)


def _url(base: str, path: str = "/v1", user_secret: str = USER_SECRET, query_secret: str = QUERY_SECRET) -> str:
    host = base.removeprefix("http://")
    nested = urllib.parse.quote(f"https://other.example/cb?token={NESTED_SECRET}&x=1", safe="")
    # the password holds an encoded @ before the secret; the fragment carries a token (OAuth)
    query = f"model=m&api_key={query_secret}&Sig={SIG_SECRET}&next={nested}"
    return f"http://scanner:pw%40{user_secret}@{host}{path}?{query}#access_token={FRAGMENT_SECRET}&state=s"


def _params(base: str, **url: str) -> list[str]:
    headers = f'headers=["Authorization: Bearer {BEARER_SECRET}", "X-Api-Key: {HEADER_SECRET}"]'
    extra = f"""extra='{{"api_key": "{JSON_SECRET}", "n": 1}}'"""
    return ["-p", f"base_url={_url(base, **url)}", "-p", headers, "-p", extra]


def _run(base: str, *args: str, expect: int = 0, **url: str) -> Any:
    result = invoke(
        "--verbose", "run", "-r", "remote", "-d", "tiny", "--output", "runs", "--leaderboard", "scratch",
        *_params(base, **url), *args,
    )  # fmt: skip
    assert result.exit_code == expect, result.output
    return result


def test_no_planted_secret_reaches_any_file_or_output(server: str, tmp_path: Path) -> None:
    printed = []
    first = _run(server, "--format", "json")
    printed += [first.stdout, first.stderr]
    # the real values reached the server: redaction is only for what is recorded
    (request,) = Server.seen
    assert f"api_key={QUERY_SECRET}" in request["path"] and f"Sig={SIG_SECRET}" in request["path"]
    assert NESTED_SECRET in urllib.parse.unquote(request["path"])
    assert request["headers"]["Authorization"] == f"Bearer {BEARER_SECRET}"
    assert request["headers"]["X-Api-Key"] == HEADER_SECRET
    assert base64.b64decode(request["headers"]["Proxy-Authorization"].split()[1]).decode().endswith(USER_SECRET)
    (run_dir,) = (tmp_path / "runs").iterdir()
    row = json.loads((run_dir / "row.json").read_text())
    recorded = row["retriever"]["params"]
    assert recorded["base_url"].startswith("http://***@127.0.0.1:") and "api_key=***&Sig=***" in recorded["base_url"]
    assert recorded["headers"] == ["Authorization: Bearer ***", "X-Api-Key: ***"]
    assert json.loads(recorded["extra"]) == {"api_key": "***", "n": 1}

    # other credentials, same configuration: the same hash, the same run directory
    again = _run(server, "--fresh", user_secret=OTHER_SECRET, query_secret=OTHER_SECRET)
    printed += [again.stdout, again.stderr]
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [run_dir.name]
    assert json.loads((run_dir / "row.json").read_text())["config_hash"] == row["config_hash"]

    # a failure whose message holds the URL, the headers and the server's echo of them
    for flags in ((), ("--traceback",)):
        failed = invoke(
            *flags, "run", "-r", "remote", "-d", "tiny", "--output", "failed", *_params(server, path="/fail")
        )
        assert failed.exit_code != 0 and "answered 500" in failed.stderr, failed.output
        printed += [failed.stdout, failed.stderr]
    dry = invoke("run", "-r", "remote", "-d", "tiny", "--dry-run", *_params(server))
    assert dry.exit_code == 0, dry.output
    printed += [dry.stdout, dry.stderr]

    for args in (
        ("submit", "runs", "-o", "remote.tar.gz"),
        ("leaderboard", "validate", "remote.tar.gz", "--format", "json"),
        ("leaderboard", "merge", "remote.tar.gz", "--into", "board"),
        ("leaderboard", "show", "board", "--format", "json"),
        ("leaderboard", "show", "board"),
        ("leaderboard", "withdraw", "remote", "--from", "board", "--reason", f"key rotated: see https://h/?access_token={REASON_SECRET}"),
    ):  # fmt: skip
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output)
        printed += [result.stdout, result.stderr]
    assert "withdrew" in (tmp_path / "board" / "CHANGELOG.md").read_text()

    # a row whose URL lost its credentials cannot be re-run as recorded, and says why
    reproduce = invoke("leaderboard", "reproduce", str(run_dir / "row.json"), "--out", "again")
    assert reproduce.exit_code != 0 and "credentials removed" in reproduce.stderr, reproduce.output
    printed += [reproduce.stdout, reproduce.stderr]

    assert_clean(tmp_path, printed)
    assert scan(tmp_path, printed, ["127.0.0.1"])  # the scanner does find what is there


def test_registry_entries_with_credentials_are_listed_and_refused_without_them(server: str, tmp_path: Path) -> None:
    url = _url(server)
    headers = [f"Authorization: Bearer {BEARER_SECRET}", f"X-Api-Key: {HEADER_SECRET}"]
    registry = {
        "retrievers": {
            "remote-keyed": {"plugin": "remote", "params": {"base_url": url, "headers": headers}},
            # invalid (headers is not a list): its error quotes the value it was given
            "remote-bad": {"plugin": "remote", "params": {"base_url": url, "headers": headers[0]}},
            # refused: a parameter named like a credential
            "remote-named": {"plugin": "remote", "params": {"base_url": url, "api_key": JSON_SECRET}},
        }
    }
    (tmp_path / "registry.yaml").write_text(json.dumps(registry))
    printed = []
    for args in (
        ("list",),
        ("list", "--params"),
        ("list", "--format", "json"),
        ("run", "-r", "remote-keyed", "-d", "tiny", "--dry-run"),
        ("run", "-r", "remote-bad", "-d", "tiny", "--dry-run"),
        ("run", "-r", "remote-named", "-d", "tiny", "--dry-run"),
        ("run", "-r", "remote-keyed", "-d", "tiny", "--format", "json"),
    ):
        result = invoke(*args)
        assert result.exit_code in (0, 2), (args, result.output)
        printed += [result.stdout, result.stderr]
    assert "holds a credential" in printed[-3] and BEARER_SECRET in Server.seen[-1]["headers"]["Authorization"]
    assert_clean(tmp_path, printed, besides={"registry.yaml"})  # the user's own file holds them, nothing else


# -- warnings and log records without --verbose -------------------------------------------

WARNED_SECRET = "wrnK7pQ2x9Z"
WARNING_PLUGIN = f"""
import logging, warnings

import harness
from harness.testing import OverlapRetriever, TinyDataset

URL = "http://h/v1?api_key={WARNED_SECRET}&model=m"


class Warner(OverlapRetriever):
    name = "warner"

    def build(self, skb, context):
        logging.getLogger("x").warning("calling %s", URL)
        warnings.warn(f"deprecated endpoint {{URL}}")
        super().build(skb, context)


@harness.hookimpl
def register_datasets(register):
    register(TinyDataset)


@harness.hookimpl
def register_retrievers(register):
    register(Warner)
"""


def test_warnings_and_log_records_are_redacted_without_verbose(tmp_path: Path) -> None:
    """Without --verbose a WARNING record went through Python's last-resort handler and a
    ``warnings.warn`` through ``showwarning``: both printed the URL as it was."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "warner.py").write_text(WARNING_PLUGIN)
    env = {**os.environ, "HARNESS_PLUGINS": "", "HARNESS_CACHE": str(tmp_path / "cache")}
    env.pop("HARNESS_VERBOSE", None)
    harness_cli = str(Path(sys.executable).with_name("harness"))
    done = subprocess.run(
        [harness_cli, "--plugins-dir", str(plugins), "run", "-r", "warner", "-d", "tiny", "--output", "runs"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "calling http://h/v1?api_key=***&model=m" in done.stderr, done.stderr
    assert "deprecated endpoint http://h/v1?api_key=***&model=m" in done.stderr, done.stderr
    assert not leaks((done.stdout + done.stderr).encode(), [WARNED_SECRET]), done.stderr
