"""``harness train``: train a trained retriever on a dataset's train split and cache its checkpoint."""

from __future__ import annotations

from typing import Any

import click

from harness.cli import common
from harness.errors import HarnessError
from harness.plugins.executors import executor_from_options, executor_options
from harness.plugins.hookspecs import hookimpl


@click.command()
@click.option("--retriever", "-r", required=True, help="registry entry or plugin retriever name (a trained one)")
@common.param_option
@click.option("--dataset", "-d", help="registry entry or plugin dataset name")
@common.training_options
@common.seed_and_device_options
@executor_options
@common.data_dir_option
@common.format_option()
@common.registry_option
def train(
    retriever: str,
    retriever_params: dict[str, Any],
    dataset: str | None,
    train_split: str,
    validation_split: str,
    seed: int,
    seeds: str | None,
    device: str,
    executor: str,
    address: str | None,
    num_gpus_per_worker: float | None,
    workers: int | None,
    devices: str | None,
    data_dir: str | None,
    fmt: str,
    registry_path: str | None,
) -> None:
    """Train a retriever (and the trained retrievers it uses) on the dataset's train split, or
    find the checkpoint of exactly this training in the cache. `harness run` then evaluates it
    without training again; the checkpoint is keyed by the training queries, the base model,
    every parameter and the seed.

    Training itself runs in this process; --executor ray and --devices reach what it builds
    first (the documents of the retrievers it uses, encoded on the cluster or the devices)."""
    from harness import api  # what training needs loads here, not for `harness --help`
    from harness.run.seeds import parse_seeds

    # nothing is evaluated: the spec's split (the registry default) only passes resolve's checks
    specs = [
        api.plan(
            retriever,
            dataset,
            seed=s,
            data_dir=data_dir,
            train_split=train_split,
            params=retriever_params,
            registry=registry_path,
        )
        for s in parse_seeds(seeds) or [seed]
    ]
    spec = specs[0]
    if spec.main.instance.regime != "trained":
        raise HarnessError(f"retriever {retriever!r} is {spec.main.instance.regime}: it has nothing to train")
    where = executor_from_options(executor, address, num_gpus_per_worker, workers)
    with common.progress() as task_factory, where:
        runner = api.runner(
            device=device,
            progress=task_factory,
            train_split=train_split,
            validation_split=None if validation_split == "none" else validation_split,
            executor=where,
            devices=common.split_list(devices) or (),
        )
        trained = [runner.train(each) for each in specs]
    if fmt == "json":
        found = [{name: info.model_dump(mode="json") for name, info in t.items()} for t in trained]
        common.echo_json(found[0] if len(found) == 1 else found)
        return
    for each in trained:
        for name, info in each.items():
            common.stdout.print(
                f"{name} (seed {info.seed}): trained on {info.split} ({info.queries} queries, digest {info.digest}) "
                f"in {info.seconds:.1f} s on {info.device}; checkpoint {info.checkpoint} "
                f"({info.checkpoint_digest[:16]})",
                highlight=False,
            )


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(train)
