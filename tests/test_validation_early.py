"""Every name, split and parameter of a run is checked before anything loads, and `--dry-run`
checks exactly what a run checks: a mistake costs a second, not the minutes a load takes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import OverlapRetriever, installed_alone
from pydantic import Field

import harness
from harness.cli import cli
from harness.plugins import PluginManager

PRESETS = """
defaults: {dataset: watched, retriever: overlap, split: test, k: 3, metrics: [hit@1, mrr]}
datasets:
  watched: {plugin: watched, splits: [test, val]}
retrievers:
  overlap: {plugin: overlap}
"""


class Watched(harness.Dataset):
    """A dataset that declares its splits and refuses to load: a run that reaches a loader has
    done work a mistake in its arguments should have prevented."""

    name = "watched"

    def known_splits(self) -> list[str]:
        return ["test", "val"]

    def load_skb(self) -> harness.SKB:
        raise AssertionError("the SKB was loaded")

    def load_queries(self) -> harness.QuerySet:
        raise AssertionError("the queries were loaded")


class Sloppy(harness.Retriever):
    """Compares a parameter before validating it, as a hand-written constructor may."""

    name = "sloppy"

    class Options(harness.Options):
        k1: float = Field(0.9, ge=0)

    def __init__(self, **params: Any) -> None:
        if params.get("k1", 0.9) < 0:  # `k1: fast` would fail here with "'<' not supported…"
            raise harness.HarnessError("k1 must not be negative")
        super().__init__(**params)

    def build(self, skb: harness.SKB, context: Any) -> None:
        raise AssertionError("built")

    def search(self, queries: Any, k: int, top_ranked: Any = None) -> list[harness.Ranking]:
        raise AssertionError("searched")


class Trained(Sloppy):
    name = "trained"
    regime = "trained"


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> PluginManager:
    directory = tmp_path_factory.mktemp("watched")
    return installed_alone(monkeypatch, directory, PRESETS, [Watched], [OverlapRetriever, Sloppy, Trained])


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stderr.strip()


@pytest.mark.usefixtures("watched")
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-s", "validation"],
            "error: dataset 'watched' has no split 'validation' (did you mean 'val'?); its splits: test, val",
        ),
        (["-s", "train"], "error: dataset 'watched' has no split 'train'; its splits: test, val"),
        (["--sample", "1.5"], "error: --sample must be a fraction in (0, 1], got 1.5"),
        (["--batch-size", "0"], "error: --batch-size must be positive, got 0"),
        (["-r", "overlapp"], "error: unknown retriever 'overlapp' (did you mean 'overlap'?); known: "),
        (["-d", "wacthed"], "error: unknown dataset 'wacthed' (did you mean 'watched'?); known: "),
        (["-m", "htis@1"], "error: unknown metric 'htis' (did you mean 'hit'?); known: "),
        (["-m", "hit@x"], "error: bad metric 'hit@x': expected NAME or NAME@K with K a positive integer"),
        (["-m", "hit@0"], "error: hit@0: the cut-off must be a positive integer"),
        (["--k", "0"], "error: k must be a positive integer, got 0"),
    ],
)
def test_a_mistake_is_reported_before_anything_loads(args: list[str], message: str, dry_run: list[str]) -> None:
    # the dataset's loaders raise AssertionError: reaching one fails the test with a traceback
    code, err = invoke("run", *args, *dry_run)
    assert code == 2 and err.startswith(message), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.usefixtures("watched")
def test_a_bad_registry_parameter_names_file_entry_parameter_value_and_type(tmp_path: Path) -> None:
    registry = tmp_path / "mine.yaml"
    registry.write_text("retrievers:\n  quick: {plugin: sloppy, params: {k1: fast}}\n")
    for dry_run in ([], ["--dry-run"]):
        code, err = invoke("run", "-r", "quick", "--registry", str(registry), *dry_run)
        assert code == 2
        last = err.splitlines()[-1]  # after the registry's warning
        assert last == (
            f"error: {registry}: retriever 'quick': bad parameters: k1: Input should be a valid number, "
            "unable to parse string as a number (got 'fast'; expected float)"
        ), err
        assert "not supported" not in err


@pytest.mark.usefixtures("watched")
def test_a_mistyped_parameter_suggests_the_declared_one(tmp_path: Path) -> None:
    registry = tmp_path / "mine.yaml"
    registry.write_text("retrievers:\n  strict: {plugin: overlap, params: {min_overlpa: 2}}\n")
    code, err = invoke("run", "-r", "strict", "--registry", str(registry), "--dry-run")
    assert code == 2
    assert err.splitlines()[-1] == (
        f"error: {registry}: retriever 'strict': bad parameters: min_overlpa: not a parameter of this "
        "component (did you mean 'min_overlap'?)"
    )


def test_debian_splits_are_told_from_file_names_before_its_files_are_read(tmp_path: Path) -> None:
    """A copy whose query file cannot be parsed: the split is refused before it is read."""
    shipped = Path(harness.__file__).parents[1] / "plugins" / "harness-debian" / "harness_debian" / "data"
    if not shipped.is_dir():
        import harness_debian

        shipped = Path(harness_debian.__file__).parent / "data"
    shutil.copytree(shipped / "v2" / "qa" / "split", tmp_path / "qa" / "split")  # the default version's
    (tmp_path / "qa" / "stark_qa").mkdir()
    (tmp_path / "qa" / "stark_qa" / "stark_qa.csv").write_text("not,a,query,file\n\x00")
    code, err = invoke("run", "-d", "debian", "-s", "validation", "--data-dir", str(tmp_path))
    assert code == 2 and err == (
        "error: dataset 'debian' has no split 'validation' (did you mean 'val'?); "
        "its splits: test, test-paraphrased, train, train-templated, val"
    )
    code, err = invoke("run", "-d", "debian", "-s", "val", "--data-dir", str(tmp_path))
    assert code == 2 and "stark_qa.csv" in err  # a split that exists goes on to read the file


def test_the_tiny_dataset_declares_its_splits() -> None:
    from harness.testing import TinyDataset

    assert TinyDataset().known_splits() == ["test", "train"]
    with pytest.raises(harness.HarnessError, match=r"has no split 'tset' \(did you mean 'test'\?\)"):
        TinyDataset().check_split("tset")


@pytest.mark.usefixtures("watched")
def test_a_condition_expecting_an_unknown_metric_is_refused_before_the_run(tmp_path: Path) -> None:
    """Else the run would finish and report the misspelt metric as "missing"."""
    registry = tmp_path / "mine.yaml"
    registry.write_text(
        "conditions:\n"
        "  - {name: overlap/watched/test, retriever: overlap, dataset: watched, split: test, k: 3,\n"
        "     expected: {hti@1: 0.5}}\n"
    )
    code, err = invoke("run", "--registry", str(registry))
    assert code == 2 and err == (
        f"error: {registry}: condition 'overlap/watched/test', expected: unknown metric 'hti' (did you mean 'hit'?); "
        "known: hit, map, mrr, ndcg, precision, recall, rprecision, stark_map"
    )


@pytest.mark.usefixtures("watched")
def test_a_trained_retriever_on_a_dataset_without_a_train_split_is_refused_before_loading() -> None:
    code, err = invoke("run", "-r", "trained")
    assert (
        code == 2 and err == "error: retriever 'trained' trains on split 'train'; 'watched' has none (has: test, val)"
    )
