"""The API models the presets, the parameter defaults and the docs' examples name are current:
each is a model the installed SDK knows and none is in its deprecation list, read from the SDK
itself, so this test follows the SDK: when a model is retired, an SDK upgrade makes it fail.

Where models are named: ``presets.yaml``; every default of a component's parameters in
harness_llm and harness_synthesis; every ``provider:model`` in their source (help texts,
descriptions, docstrings, error messages) and READMEs, and the root README."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import re
import typing
from pathlib import Path

import yaml

import harness
import harness_llm
from harness.testing import require

PLUGIN = Path(harness_llm.__file__).parent
REPO = Path(__file__).resolve().parents[3]
SPEC = re.compile(r"\b(openai|anthropic):([A-Za-z0-9][\w.-]*)")


def literal_values(alias: object) -> set[str]:
    """The strings of a ``Literal[...]`` type alias, or of the ``Literal`` inside a ``Union``."""
    if typing.get_origin(alias) is typing.Literal:
        return set(typing.get_args(alias))
    return {value for arg in typing.get_args(alias) for value in literal_values(arg)}


def packages() -> list[Path]:
    """harness_llm, and harness_synthesis where it is installed."""
    found = [PLUGIN]
    spec = importlib.util.find_spec("harness_synthesis")
    if spec is not None and spec.submodule_search_locations:
        found.append(Path(next(iter(spec.submodule_search_locations))))
    return found


def documents() -> list[Path]:
    """The source and READMEs that may name a model as an example."""
    files = [file for package in packages() for file in sorted(package.glob("*.py"))]
    files += [package.parent / "README.md" for package in packages()]
    return [*files, REPO / "README.md"]


def defaults() -> dict[str, str]:
    """Every string default of a component's parameters (``Options``) in these packages, by
    ``module.Class.field``: where a default model would hide."""
    found = {}
    for package in packages():
        for module in pkgutil.iter_modules([str(package)]):
            loaded = importlib.import_module(f"{package.name}.{module.name}")
            for owner in vars(loaded).values():
                options = getattr(owner, "Options", None)
                if not (inspect.isclass(owner) and inspect.isclass(options) and issubclass(options, harness.Options)):
                    continue
                for name, field in options.model_fields.items():
                    if isinstance(field.default, str):
                        found[f"{loaded.__name__}.{owner.__name__}.{name}"] = field.default
    return found


def named_models(provider: str) -> dict[str, str]:
    """``provider``'s models named by a preset (by preset name), a default (by field) or the
    source and docs (by file and line)."""
    presets = yaml.safe_load((PLUGIN / "presets.yaml").read_text(encoding="utf-8"))
    found, served = {}, set()
    for name, entry in presets["retrievers"].items():
        params = entry.get("params", {})
        match = SPEC.fullmatch(str(params.get("llm", "")))
        if match and "base_url" in params.get("llm_params", {}):
            served.add(match[2])  # a model behind a server of your own (harness-llm-serve), not the API's
        elif match and match[1] == provider:
            found[f"preset {name}"] = match[2]
    for where, default in defaults().items():
        match = SPEC.fullmatch(default)
        if match and match[1] == provider:
            found[f"default {where}"] = match[2]
    for file in documents():
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            for match in SPEC.finditer(line):
                # MODEL, NAME: placeholders, not models
                if match[1] == provider and match[2] not in served and not match[2].isupper():
                    found[f"{file.relative_to(REPO)}:{number}"] = match[2]
    return found


def test_the_places_that_name_models_are_all_read() -> None:
    """The scan reaches what it claims to: the reranker's ``llm`` (required, so no default model
    goes stale), the synthesis stages' defaults, and the examples in the files it reads."""
    from harness_llm.rerank import LLMReranker

    assert LLMReranker.Options.model_fields["llm"].is_required()
    names = {file.relative_to(REPO).as_posix() for file in documents()}
    assert {"README.md", "plugins/harness-llm/README.md", "plugins/harness-llm/harness_llm/rerank.py"} <= names
    assert {"plugins/harness-llm/harness_llm/options.py", "plugins/harness-llm/harness_llm/api.py"} <= names
    if len(packages()) > 1:
        assert {"plugins/harness-synthesis/README.md", "plugins/harness-synthesis/harness_synthesis/cli.py"} <= names
    where = {w.split(":")[0] for w in named_models("openai")}
    assert {"README.md", "plugins/harness-llm/harness_llm/rerank.py", "plugins/harness-llm/harness_llm/api.py"} <= where


def test_the_claude_models_are_known_and_not_deprecated_by_the_anthropic_sdk() -> None:
    require("anthropic", extra="stark-harness-llm")
    import anthropic.types
    from anthropic.resources.messages.messages import DEPRECATED_MODELS  # what messages.create warns with

    known = literal_values(anthropic.types.Model)
    models = named_models("anthropic")
    assert "preset bm25-claude-rerank" in models and known and DEPRECATED_MODELS
    for where, model in models.items():
        assert model in known, f"{where}: {model} is not a model the anthropic SDK knows"
        assert model not in DEPRECATED_MODELS, f"{where}: {model} reaches end of life {DEPRECATED_MODELS[model]}"


def test_the_openai_models_are_known_and_not_deprecated_by_the_openai_sdk() -> None:
    require("openai", extra="stark-harness-llm")
    import openai.types.shared.chat_model as chat_model

    known = literal_values(chat_model.ChatModel)
    # the SDK lists deprecated ids in the docstring that follows ChatModel ("Deprecated values: ...")
    source = inspect.getsource(chat_model)
    deprecated = set(re.findall(r'"([^"\s]+)"', source[source.index("Deprecated values:") :]))
    models = named_models("openai")
    assert "preset bm25-openai-rerank" in models and "gpt-4o-mini" in deprecated  # the parse found the list
    for where, model in models.items():
        assert model in known, f"{where}: {model} is not a chat model the openai SDK knows"
        assert model not in deprecated, f"{where}: {model} is deprecated by the openai SDK"
