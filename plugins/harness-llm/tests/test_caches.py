"""The LLM response cache: keyed by what decides an answer (a local model by its bytes) and
checked against a digest on load; a damaged entry is asked again with a warning naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness_llm.api import Message
from harness_llm.base import Attempt, ResilientLLM
from harness_llm.local import LocalLLM


class _Counting(ResilientLLM):
    name = "counting"

    def __init__(self, **params: object) -> None:
        super().__init__("m", **params)
        self.asked = 0

    def _call(self, messages: list[Message], max_tokens: int, temperature: float) -> Attempt:
        self.asked += 1
        return Attempt("the answer", 3, 2)


def test_damaged_llm_answer_is_asked_again_with_a_warning(capfd: pytest.CaptureFixture[str]) -> None:
    llm = _Counting()
    assert llm.complete("q?").text == "the answer" and llm.asked == 1
    assert llm.complete("q?").cached and llm.asked == 1
    path = llm._cache_path([Message("user", "q?")], 256, 0.0)
    entry = json.loads(path.read_text())
    path.write_text(json.dumps({**entry, "text": "another answer"}))  # valid JSON, wrong answer
    capfd.readouterr()
    answer = llm.complete("q?")
    assert answer.text == "the answer" and not answer.cached and llm.asked == 2
    assert str(path) in capfd.readouterr().err


def test_without_the_cache_every_prompt_is_asked() -> None:
    llm = _Counting(cache=False)
    assert not llm.complete("q?").cached and not llm.complete("q?").cached and llm.asked == 2


def test_a_local_model_replaced_by_one_of_equal_size_does_not_reuse_answers(tmp_path: Path) -> None:
    model, messages = tmp_path / "model.gguf", [Message("user", "q?")]
    model.write_bytes(b"\x01" * 1024)
    before = LocalLLM(str(model))._cache_path(messages, 8, 0.0)
    model.write_bytes(b"\x02" * 1024)  # another model, same path and size
    assert LocalLLM(str(model))._cache_path(messages, 8, 0.0) != before
    # the same model on another device answers apart
    on_cuda = LocalLLM(str(model), device="cuda")._cache_path(messages, 8, 0.0)
    assert on_cuda != LocalLLM(str(model))._cache_path(messages, 8, 0.0)
