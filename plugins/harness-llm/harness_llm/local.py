"""A model in this process, through transformers: a GGUF file (dequantized on load) or a
model directory. Greedy decoding by default, so answers are reproducible; one generation
at a time (a lock), since a CPU model gains nothing from parallel calls. ``batch_size`` > 1
makes :meth:`LocalLLM.complete_many` generate that many prompts together (left-padded):
several times the throughput, since decoding one sequence leaves the hardware idle."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from harness import HarnessError, directory_digest, file_digest
from harness_llm.api import Completion, Message, messages_of
from harness_llm.base import Attempt, ResilientLLM

__all__ = ["LocalLLM"]


class LocalLLM(ResilientLLM):
    """``local:/path/model.gguf`` or ``local:/path/model-dir``."""

    name = "local"

    class Options(ResilientLLM.Options):
        # one generation at a time, and nothing transient to retry in this process
        concurrency: int = Field(1, ge=1, description="prompts answered at once (generation itself is serial)")
        retries: int = Field(0, ge=0, description="retries of a failed generation")
        batch_size: int = Field(
            1,
            ge=1,
            description="prompts complete_many generates together; above 1 answers can differ from "
            "one-at-a-time generation where two tokens nearly tie",
        )
        device: Literal["cpu", "cuda"] | None = Field(
            None, description="where the model runs; default: the run's --device (cpu outside a run)"
        )

    options: Options

    def __init__(self, model: str, **params: Any) -> None:
        super().__init__(model, **params)
        self._loaded: tuple[Any, Any] | None = None
        self._generate_lock = threading.Lock()

    def endpoint(self) -> str:
        """The model by content (a file's or a directory's bytes, not its name or size) and the
        device: two models of equal size never share cached answers."""
        path = Path(self.model).expanduser()
        if path.is_file():
            content = file_digest(path)
        elif path.is_dir():
            content = directory_digest(path)
        else:
            content = "missing"  # load() says so
        return f"{path.name}:{content[:32]}:{self.device}"

    def price(self) -> tuple[float, float]:
        return (0.0, 0.0)  # in this process: no per-token price

    @property
    def device(self) -> str:
        return self.options.device or "cpu"

    def load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            path = Path(self.model).expanduser()
            if not path.exists():
                raise HarnessError(f"local: no model at {path} (a .gguf file or a transformers model directory)")
            try:
                import torch
                from transformers import AutoModelForCausalLM, AutoTokenizer
            except ImportError as exc:
                raise HarnessError(f"local: {exc.name} is missing; pip install 'stark-harness-llm[local]'") from exc
            where = {"pretrained_model_name_or_path": str(path)}
            if path.is_file():
                where = {"pretrained_model_name_or_path": str(path.parent), "gguf_file": path.name}
            tokenizer = AutoTokenizer.from_pretrained(**where)
            model = AutoModelForCausalLM.from_pretrained(**where, torch_dtype=torch.float32)
            # transformers types `to` as functools.wraps(nn.Module.to) made it: unbound (model first)
            model.to(self.device).eval()  # type: ignore[arg-type]
            self._loaded = (tokenizer, model)
        return self._loaded

    def _call(self, messages: list[Message], max_tokens: int, temperature: float) -> Attempt:
        import torch

        tokenizer, model = self.load()
        chat = [{"role": m.role, "content": m.content} for m in messages]
        inputs = tokenizer.apply_chat_template(
            chat, add_generation_prompt=True, return_tensors="pt", return_dict=True
        ).to(model.device)
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
        with self._generate_lock, torch.inference_mode():
            output = model.generate(
                **inputs, max_new_tokens=max_tokens, pad_token_id=tokenizer.eos_token_id, **sampling
            )
        prompt_length = inputs["input_ids"].shape[1]
        new = output[0][prompt_length:]
        return Attempt(tokenizer.decode(new, skip_special_tokens=True), int(prompt_length), len(new))

    def complete_many(
        self, prompts: Sequence[str | Sequence[Message]], max_tokens: int = 256, temperature: float = 0.0
    ) -> list[Completion]:
        if self.options.batch_size == 1 or len(prompts) <= 1:
            return super().complete_many(prompts, max_tokens, temperature)
        chats = [messages_of(p) for p in prompts]
        paths = [self._cache_path(chat, max_tokens, temperature) for chat in chats]
        answers: list[Completion | None] = [None] * len(chats)
        for i, path in enumerate(paths):
            cached = self._read_cache(path) if self.options.cache else None
            if cached is not None:
                self._count(cached)
                answers[i] = cached
        texts = {i: self._chat_text(chats[i]) for i, a in enumerate(answers) if a is None}
        # prompts of similar length together, so little of a batch is padding
        order = sorted(texts, key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.options.batch_size):
            batch = order[start : start + self.options.batch_size]
            started = time.perf_counter()
            attempts = self._generate([texts[i] for i in batch], max_tokens, temperature)
            seconds = (time.perf_counter() - started) / len(batch)
            for i, attempt in zip(batch, attempts, strict=True):
                answers[i] = self._record(attempt, seconds, paths[i])
        return [a for a in answers if a is not None]

    def _chat_text(self, messages: list[Message]) -> str:
        tokenizer, _ = self.load()
        chat = [{"role": m.role, "content": m.content} for m in messages]
        return str(tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False))

    def _generate(self, texts: list[str], max_tokens: int, temperature: float) -> list[Attempt]:
        """Generate for ``texts`` (chat-formatted prompts) together, left-padded."""
        import torch

        tokenizer, model = self.load()
        tokenizer.padding_side = "left"  # generation continues from each prompt's last token
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        tokenizer.pad_token_id = pad
        inputs = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
        with self._generate_lock, torch.inference_mode():
            output = model.generate(**inputs, max_new_tokens=max_tokens, pad_token_id=pad, **sampling)
        width = inputs["input_ids"].shape[1]
        attempts = []
        for row, mask in zip(output, inputs["attention_mask"], strict=True):
            new = row[width:].tolist()
            if tokenizer.eos_token_id in new:  # what one-at-a-time generation returns: up to the end token
                new = new[: new.index(tokenizer.eos_token_id) + 1]
            attempts.append(Attempt(tokenizer.decode(new, skip_special_tokens=True), int(mask.sum()), len(new)))
        return attempts
