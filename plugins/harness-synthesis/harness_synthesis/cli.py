"""``harness synthesize``: STaRK's four stages over a dataset's SKB, written as a query set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

import harness
from harness import HarnessError


def add_command(cli: click.Group) -> None:
    @cli.command()
    @click.option("--dataset", "-d", required=True, help="registry or plugin dataset whose SKB to use")
    @click.option("--n", "count", type=int, default=20, show_default=True, help="relational requirements to draw")
    @click.option("--llm", required=True, help="provider:model, e.g. openai:gpt-5.4-mini")
    @click.option("--llm-param", "llm_params", multiple=True, help="KEY=VALUE for the provider (base_url=…)")
    @click.option("--verifier", "verifiers", multiple=True, help="more provider:model verifiers for the filter")
    @click.option("--templates", help="template set (default: the dataset's name without 'stark-')")
    @click.option("--role", help="who asks (default by template set: customer, researcher, doctor, Debian user)")
    @click.option("--max-candidates", type=int, default=20, show_default=True)
    @click.option(
        "--request",
        type=click.Choice(["llm", "template"]),
        default="llm",
        show_default=True,
        help="who writes each request: the LLM (kept only if it still states the requirement), or the "
        "template with the properties appended (no LLM call)",
    )
    @click.option(
        "--judge",
        type=click.Choice(["llm", "literal", "both"]),
        default="llm",
        show_default=True,
        help="who decides which candidates have the properties: the verifier LLMs, the literal check "
        "(the candidate's document says it; exact for properties copied from the gold), or both",
    )
    @click.option(
        "--doc-chars",
        type=int,
        help="characters of each document the LLM reads (default: 1500 for properties, 1000 for verifying)",
    )
    @click.option(
        "--exclude-answers-of",
        "exclude_splits",
        multiple=True,
        help="a split of the dataset whose answers are never a gold answer (repeat; e.g. val, test)",
    )
    @click.option("--seed", type=int, default=0, show_default=True)
    @harness.executor_options(devices=False)
    @click.option("--out", type=click.Path(file_okay=False), required=True)
    @click.option("--data-dir", type=click.Path(file_okay=False))
    def synthesize(
        dataset: str,
        count: int,
        llm: str,
        llm_params: tuple[str, ...],
        verifiers: tuple[str, ...],
        templates: str | None,
        role: str | None,
        max_candidates: int,
        request: str,
        judge: str,
        exclude_splits: tuple[str, ...],
        doc_chars: int | None,
        seed: int,
        executor: str,
        address: str | None,
        num_gpus_per_worker: float | None,
        workers: int | None,
        out: str,
        data_dir: str | None,
    ) -> None:
        """Synthesize a query set from an SKB with STaRK's four stages (resumable). With
        --executor ray the LLM stages' calls run on a Ray cluster's workers, in the chunks a
        local run asks, so the query set is the same."""
        from harness_synthesis.llm_stages import Filter, Fuse, TextualProperties
        from harness_synthesis.pipeline import ROLES, run_pipeline, write_query_set
        from harness_synthesis.relational import RelationalRequirement

        params: dict[str, Any] = {}
        for item in llm_params:
            key, sep, value = item.partition("=")
            if not sep:
                raise HarnessError(f"--llm-param {item!r}: write KEY=VALUE")
            try:  # numbers, true/false, lists and objects as JSON; anything else is a string
                params[key] = json.loads(value)
            except ValueError:
                params[key] = value
        templates = templates or dataset.removeprefix("stark-")
        role = role or ROLES.get(templates, "user")
        common = {"llm": llm, "llm_params": params, "role": role}
        source = harness.load_dataset(dataset, data_dir)
        excluded: set[int] = set()
        if exclude_splits:
            for split in exclude_splits:
                source.check_split(split)
            queries = source.load_queries()
            excluded = {a for split in exclude_splits for q in queries.split(split) for a in q.answer_ids}
        shown = {"doc_chars": doc_chars} if doc_chars else {}
        stages = [
            RelationalRequirement(
                templates=templates, n=count, max_candidates=max_candidates, exclude_gold=sorted(excluded)
            ),
            TextualProperties(**common, **shown, literal=judge == "literal"),
            Fuse(**common, request=request),
            Filter(**common, **shown, verifiers=list(verifiers), max_candidates=max_candidates, judge=judge),
        ]
        where = harness.executor_from_options(executor, address, num_gpus_per_worker, workers)
        for stage in stages[1:]:
            stage.executor = where  # type: ignore[attr-defined]
        skb = source.load_skb()
        with where:
            drafts = run_pipeline(skb, stages, seed, Path(out) / "work", progress=click.echo)
        config = {
            "templates": templates,
            "role": role,
            "llm": llm,
            "verifiers": list(verifiers),
            "n": count,
            "max_candidates": max_candidates,
            "request": request,
            "judge": judge,
            "doc_chars": doc_chars,
            "excluded_answers_of": list(exclude_splits),
            "excluded_golds": {"count": len(excluded), "digest": harness.stable_hash(sorted(excluded))},
            "skb_fingerprint": skb.fingerprint,
            "seed": seed,
        }
        summary = write_query_set(Path(out), dataset, drafts, config, seed)
        click.echo(json.dumps({k: v for k, v in summary.items() if k != "config"}))
