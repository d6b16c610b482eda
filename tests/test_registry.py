"""registry.yaml: validation errors name the file, the entry and the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.run.registry import load_registry, parse_registry

REPO = Path(__file__).resolve().parent.parent


def test_repository_registry_is_valid() -> None:
    registry = load_registry(REPO / "registry.yaml")
    assert registry.defaults.dataset == "debian" and registry.defaults.retriever == "bm25"
    assert "debian" in registry.datasets and "bm25" in registry.retrievers
    assert all(c.expected for c in registry.conditions)


def test_bundled_registry_is_found_from_any_directory() -> None:
    # the autouse fixture runs every test in an empty temporary directory
    assert load_registry().source.endswith("registry.yaml")


@pytest.mark.parametrize(
    "text, message",
    [
        ("datasets: [", "not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("datasets:\n  d: {params: {}}\n", r"datasets\.d\.plugin: Field required"),
        ("retrievers:\n  r: {plugin: bm25, colour: red}\n", r"retrievers\.r\.colour: Extra inputs are not permitted"),
        (
            "retrievers:\n  r: {plugin: x, first_stage: r}\n",
            r"retrievers\.r\.first_stage: a retriever cannot rerank itself",
        ),
        (
            "conditions:\n  - {name: c, retriever: r, dataset: d, split: s, k: 0}\n",
            r"conditions\.0\.k: Input should be greater than 0",
        ),
        (
            "datasets:\n  d: {plugin: p, splits: [test]}\n"
            "conditions:\n  - {name: c, retriever: r, dataset: d, split: val}\n",
            r"split 'val' is not among datasets\.d\.splits",
        ),
        (
            "conditions:\n  - {name: c, retriever: r, dataset: d, split: s}\n"
            "  - {name: c, retriever: r, dataset: d, split: t}\n",
            "duplicate condition name 'c'",
        ),
    ],
)
def test_malformed_registries(text: str, message: str) -> None:
    with pytest.raises(HarnessError, match=message) as info:
        parse_registry(text, "my-registry.yaml")
    assert str(info.value).startswith("my-registry.yaml")


def test_missing_explicit_registry(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="does not exist"):
        load_registry(tmp_path / "nope.yaml")
