"""Parameters, declared once.

Every component (dataset, retriever) declares its parameters as a pydantic model named
``Options`` on its class, one field each, with a type, a default and a description::

    class BM25(harness.Retriever):
        name = "bm25"

        class Options(harness.Options):
            k1: float = Field(0.9, ge=0, description="term-frequency saturation")
            b: float = Field(0.4, ge=0, le=1, description="length normalisation")

The harness validates registry entries against it when the registry loads, ``harness list
--params`` prints it, and rows record ``options.model_dump()``: every parameter with the value
that ran, defaults and derived defaults included, so a release that changes one can never reuse
results computed with the old value.
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import HarnessError


class Options(BaseModel):
    """Base class of a component's parameters. Unknown names are an error; derive defaults
    that depend on other fields in a ``model_validator(mode="after")`` so they are recorded."""

    model_config = ConfigDict(extra="forbid", validate_default=True, defer_build=True)


class DocumentOptions(Options):
    """Which document of each node a retriever reads (``SKB.document``): for retrievers that
    index text. Subclasses may change the defaults (STaRK's multi-vector baseline reads
    compact documents with relations)."""

    with_relations: bool = Field(False, description="documents with their relations linearized")
    compact: bool = Field(False, description="documents folded onto one line (STaRK's ColBERT and multi-vector)")


M = TypeVar("M", bound=BaseModel)


def parse_options(options: type[M], params: dict[str, Any] | None, what: str) -> M:
    """``params`` validated against ``options``, or one :class:`HarnessError` listing every problem
    (each with the value given and the type expected)."""
    try:
        return options.model_validate(dict(params or {}))
    except ValidationError as exc:
        raise HarnessError(f"{what}: bad parameters: {describe_errors(exc, options)}") from None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'val'?)`` for the choice closest to a mistyped ``name``, else ``""``."""
    choices = list(choices)
    close = difflib.get_close_matches(name.lower(), choices, n=1, cutoff=0.5)
    if not close:  # a word the choice abbreviates, or that abbreviates it ("validation" → "val")
        lowered = name.lower()
        close = [c for c in choices if len(c) >= 3 and (lowered.startswith(c.lower()) or c.lower().startswith(lowered))]
        close = sorted(close, key=len, reverse=True)[:1] if len(lowered) >= 3 else []
    return f" (did you mean {close[0]!r}?)" if close else ""


#: pydantic error types that mean "not of the declared type" (not "outside a bound")
_TYPE_ERRORS = ("_type", "_parsing", "literal_error", "enum", "int_from_float")


def describe_errors(exc: ValidationError, options: type[BaseModel] | None = None) -> str:
    """One line per problem: ``parameter: what is wrong``. Given the model, each also names the
    value given, the type expected and, for an unknown name, the closest parameter."""
    problems = []
    for error in exc.errors():
        loc = ".".join(str(part) for part in error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        field = options.model_fields.get(str(error["loc"][0])) if options is not None and error["loc"] else None
        if error["type"] == "extra_forbidden":
            message = "not a parameter of this component"
            if options is not None:
                message += did_you_mean(loc, options.model_fields)
        elif field is not None and error["type"] != "missing":
            given = error.get("input")
            shown = repr(given) if len(repr(given)) <= 60 else repr(given)[:57] + "..."
            expected = f"; expected {_type_name(field.annotation)}" if error["type"].endswith(_TYPE_ERRORS) else ""
            message += f" (got {shown}{expected})"
        problems.append(f"{loc}: {message}" if loc else message)
    return "; ".join(problems)


def describe_options(options: type[Options]) -> list[dict[str, Any]]:
    """One entry per parameter (name, type, default, description), for ``harness list --params``."""
    rows = []
    for name, field in options.model_fields.items():
        type_name = _type_name(field.annotation)
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        rows.append(
            {
                "name": name,
                "type": type_name,
                "default": "(required)" if field.is_required() else default,
                "description": field.description or "",
            }
        )
    return rows


def _type_name(annotation: Any) -> str:
    """``Literal['a', 'b']`` as ``'a' | 'b'``; ``int | None`` as ``int | None``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if args and origin is not None and origin.__name__ in ("UnionType", "Union"):
        return " | ".join(_type_name(a) for a in args)
    if annotation is type(None):
        return "None"
    if origin is not None and args:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(_type_name(a) for a in args)}]"
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")
