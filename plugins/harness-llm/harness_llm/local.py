"""A model in this process, through transformers: a GGUF file (dequantized on load) or a
model directory. Greedy decoding by default, so answers are reproducible; one generation
at a time (a lock), since a CPU model gains nothing from parallel calls."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from harness import HarnessError, directory_digest, file_digest
from harness_llm.api import Message
from harness_llm.base import Attempt, ResilientLLM

__all__ = ["LocalLLM"]


class LocalLLM(ResilientLLM):
    """``local:/path/model.gguf`` or ``local:/path/model-dir``."""

    name = "local"

    class Options(ResilientLLM.Options):
        # one generation at a time, and nothing transient to retry in this process
        concurrency: int = Field(1, ge=1, description="prompts answered at once (generation itself is serial)")
        retries: int = Field(0, ge=0, description="retries of a failed generation")
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
            model.to(self.device).eval()
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
