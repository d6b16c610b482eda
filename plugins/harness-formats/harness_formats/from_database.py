"""A relational database → an SKB, read through SQLAlchemy's reflection (any dialect it knows).

Every table is a node type and each row a node (id ``<table>:<primary key>``; a composite key's
values joined by ``,``), its text columns (strings that are neither keys nor the name) are the
node's fields. Every foreign key is a typed edge from the row to the row it references (type
``<table>.<column>``); a link table (exactly two foreign keys, no text, referenced by none)
becomes direct edges between the two rows it joins (type: the link table's name). This is the
setting of DAQu (Jeong et al.): queries augmented by rows joined across metadata tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import harness
from harness_formats.build import SKBBuilder
from harness_formats.tables import scalar, text

if TYPE_CHECKING:  # SQLAlchemy is imported when a database is read
    from sqlalchemy import Select


@dataclass
class ForeignKey:
    columns: tuple[str, ...]
    target: str
    target_columns: tuple[str, ...]


@dataclass
class TableInfo:
    name: str
    columns: list[str]
    text_columns: list[str]  # string-typed, or of no known type and holding only text
    primary_key: list[str]
    foreign_keys: list[ForeignKey] = field(default_factory=list)

    def relation(self, key: ForeignKey) -> str:
        return f"{self.name}.{','.join(key.columns)}"

    @property
    def key_columns(self) -> set[str]:
        return set(self.primary_key) | {c for key in self.foreign_keys for c in key.columns}


def _words(columns: Sequence[str]) -> str:
    return ", ".join(columns).replace("_", " ")


def _by_values(info: TableInfo, values: Any) -> str:
    """A row named by its values, where no key names it."""
    return "(" + ", ".join(f"{c}={scalar(values[c])}" for c in info.columns) + ")"


def _key(values: Sequence[Any]) -> tuple[str, ...] | None:
    """A key's values as text (so a TEXT foreign key finds an INTEGER primary key); None if NULL."""
    parts = tuple(scalar(v) for v in values)
    return None if any(p is None for p in parts) else parts  # type: ignore[return-value]


class Database:
    """The database behind a URL or a file path, with its tables reflected."""

    def __init__(self, database: str, exclude: Sequence[str] = ()) -> None:
        from sqlalchemy import create_engine, inspect
        from sqlalchemy.engine import URL, make_url
        from sqlalchemy.exc import ArgumentError, SQLAlchemyError

        if "://" in database:
            try:
                url = make_url(database)
            except ArgumentError as exc:
                raise harness.HarnessError(f"{database}: not a database URL: {exc}") from exc
            path = url.database if url.get_backend_name() == "sqlite" else None
            # SQLite would create a missing file and read it as an empty database
            if path and path != ":memory:" and not path.startswith("file:") and not Path(path).is_file():
                raise harness.HarnessError(f"{database}: no such SQLite file {path}")
            self.shown = url.render_as_string(hide_password=True)
        else:
            if not Path(database).is_file():
                raise harness.HarnessError(f"{database}: no such file (give a path to a SQLite file or a database URL)")
            url = URL.create("sqlite", database=str(Path(database)))
            self.shown = database
        try:
            self.engine = create_engine(url)
        except (ArgumentError, ImportError, SQLAlchemyError) as exc:
            raise harness.HarnessError(f"{self.shown}: cannot open the database: {exc}") from exc
        self.error = SQLAlchemyError
        try:
            inspector = inspect(self.engine)
            names = sorted(inspector.get_table_names())
            unknown = sorted(set(exclude) - set(names))
            if unknown:
                raise harness.HarnessError(
                    f"--exclude: no table {', '.join(map(repr, unknown))} in {self.shown}; "
                    f"its tables: {', '.join(names)}"
                )
            self.tables = {name: self._reflect(inspector, name) for name in names if name not in exclude}
        except SQLAlchemyError as exc:
            raise harness.HarnessError(f"{self.shown}: cannot read the database: {exc}") from exc
        if not self.tables:
            raise harness.HarnessError(f"{self.shown}: no tables")
        self.excluded = list(exclude)

    def _reflect(self, inspector: Any, name: str) -> TableInfo:
        from sqlalchemy import types

        columns = inspector.get_columns(name)
        # a type that says nothing (SQLite's undeclared, JSON, a type SQLAlchemy does not know):
        # the values decide
        undecided = [
            c["name"] for c in columns if isinstance(c["type"], types.NullType | types.JSON | types.PickleType)
        ]
        texts = set(self._only_text(name, undecided)) if undecided else set()
        info = TableInfo(
            name=name,
            columns=[c["name"] for c in columns],
            text_columns=[c["name"] for c in columns if isinstance(c["type"], types.String) or c["name"] in texts],
            primary_key=list(inspector.get_pk_constraint(name).get("constrained_columns") or []),
        )
        keys = []
        for key in inspector.get_foreign_keys(name):
            keys.append(
                (
                    key.get("referred_schema"),
                    ForeignKey(
                        tuple(key["constrained_columns"]),
                        key["referred_table"],
                        tuple(c for c in key.get("referred_columns") or () if c),
                    ),
                )
            )
        # in the order of their columns in the table: a link table's edges go from its first key
        position = {column: number for number, column in enumerate(info.columns)}
        keys.sort(key=lambda k: [position.get(c, len(position)) for c in k[1].columns])
        info.foreign_keys = [key for schema, key in keys if schema is None]
        return info

    def _only_text(self, name: str, columns: Sequence[str]) -> list[str]:
        """Those of ``columns`` whose every non-NULL value is text (one pass over the table)."""
        from sqlalchemy import column, select, table

        texts = set(columns)
        with self.engine.connect() as connection:
            statement: Select[*tuple[Any, ...]] = select(*(column(c) for c in columns)).select_from(table(name))
            for row in connection.execution_options(stream_results=True, yield_per=4096).execute(statement):
                for c, value in zip(columns, row, strict=True):
                    if value is not None and not isinstance(value, str):
                        texts.discard(c)
                if not texts:
                    break
        return [c for c in columns if c in texts]

    def left_out(self) -> dict[str, list[str]]:
        """Per table, the columns no node reads: neither text nor a key."""
        result = {}
        for name, info in self.tables.items():
            columns = [c for c in info.columns if c not in info.text_columns and c not in info.key_columns]
            if columns:
                result[name] = columns
        return result

    def where(self, table: str, row: str, column: str) -> str:
        return f"{self.shown}, table {table!r}, row {row}, column {column!r}"

    def count(self, name: str) -> int:
        from sqlalchemy import func, select, table

        with self.engine.connect() as connection:
            return int(connection.execute(select(func.count()).select_from(table(name))).scalar_one())

    def rows(self, info: TableInfo, order: Sequence[str]) -> Any:
        """The table's rows as mappings, in ``order`` (a total order, so imports repeat exactly)."""
        from sqlalchemy import column, select, table

        statement: Select[*tuple[Any, ...]] = select(*(column(c) for c in info.columns)).select_from(table(info.name))
        statement = statement.order_by(*(column(c) for c in order))
        with self.engine.connect() as connection:
            result = connection.execution_options(stream_results=True, yield_per=4096).execute(statement)
            for row in result:
                yield row._mapping


def read_database(
    db: Database, builder: SKBBuilder, name_columns: dict[str, str], track: Callable[..., Any]
) -> dict[str, list[str]]:
    """Fill ``builder`` from ``db``; returns the tables read as node types, as links, and the
    link tables left out with a table they join."""
    tables = db.tables
    referenced = {key.target for info in tables.values() for key in info.foreign_keys}
    links = [
        name
        for name, info in tables.items()
        if len(info.foreign_keys) == 2
        and name not in referenced
        and not [c for c in info.text_columns if c not in info.key_columns]
    ]
    for info in tables.values():
        for key in info.foreign_keys:
            if key.target in tables and not key.target_columns:  # REFERENCES t: t's primary key
                key.target_columns = tuple(tables[key.target].primary_key)
    # what points into an excluded table is left out with it: a foreign key, a whole link table
    dropped = [name for name in links if any(k.target not in tables for k in tables[name].foreign_keys)]
    links = [name for name in links if name not in dropped]
    for info in tables.values():
        info.foreign_keys = [k for k in info.foreign_keys if k.target in tables]
    nodes = [name for name in tables if name not in links and name not in dropped]
    for table, name_column in name_columns.items():
        if table not in tables:
            raise harness.HarnessError(f"--name-column {table}={name_column}: no table {table!r} in {db.shown}")
        if table in links or table in dropped:
            raise harness.HarnessError(f"--name-column {table}={name_column}: {table!r} is a link table, not nodes")
        if name_column not in tables[table].columns:
            raise harness.HarnessError(
                f"--name-column {table}={name_column}: table {table!r} has no column {name_column!r}; "
                f"its columns: {', '.join(tables[table].columns)}"
            )
    # what foreign keys point at: (table, columns) → key values → node
    lookups: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], int]] = {}
    for info in tables.values():
        for key in info.foreign_keys:
            lookups.setdefault((key.target, key.target_columns), {})
    # foreign keys read before the rows they point at may be: resolved once every table is read
    pending: list[tuple[int, int, ForeignKey, tuple[str, ...], str, str]] = []
    try:
        for name in nodes:
            _read_node_table(db, builder, tables[name], name_columns.get(name), lookups, pending, track)
        for relation, src, fk, values, node_id, table_name in pending:
            dst = lookups[(fk.target, fk.target_columns)].get(values)
            if dst is None:
                raise harness.HarnessError(
                    f"{db.where(table_name, repr(node_id), ','.join(fk.columns))}: {','.join(values)} is no row of "
                    f"table {fk.target!r} (column {','.join(fk.target_columns)})"
                )
            builder.add_edge(src, dst, relation)
        for name in links:
            _read_link_table(db, builder, tables[name], lookups, track)
    except db.error as exc:
        raise harness.HarnessError(f"{db.shown}: cannot read the database: {exc}") from exc
    return {"nodes": nodes, "links": links, "links_left_out": dropped}


def _read_node_table(
    db: Database,
    builder: SKBBuilder,
    info: TableInfo,
    name_column: str | None,
    lookups: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], int]],
    pending: list[Any],
    track: Callable[..., Any],
) -> None:
    if not info.primary_key:
        raise harness.HarnessError(
            f"{db.shown}, table {info.name!r}: no primary key, so its rows have no ids; "
            f"leave it out with --exclude {info.name}"
        )
    total = db.count(info.name)
    if not total:
        raise harness.HarnessError(
            f"{db.shown}, table {info.name!r}: no rows (an empty table); leave it out with --exclude {info.name}"
        )
    texts = [c for c in info.text_columns if c not in info.key_columns]
    if name_column is None and texts:
        name_column = texts[0]
    fields = [c for c in texts if c != name_column]
    # a table keyed by one text column (tags, say) is named by its key
    if name_column is None and len(info.primary_key) == 1 and info.primary_key[0] in info.text_columns:
        name_column = info.primary_key[0]
    mine = {columns: lookups[(table, columns)] for table, columns in lookups if table == info.name}
    # a book reads "publisher id: Sandglass Press", the publisher "books (publisher id): The Salt Road"
    relations = [
        (builder.relation(info.relation(key), _words(key.columns), f"{info.name} ({_words(key.columns)})"), key)
        for key in info.foreign_keys
    ]
    source = builder.source(lambda row: f"{db.shown}, table {info.name!r}, row {row} (in primary key order)")
    with track(f"table {info.name}", total) as progress:
        for position, values in enumerate(db.rows(info, info.primary_key), start=1):
            if position % 4096 == 0:
                progress(position)
            key = _key([values[c] for c in info.primary_key])
            node_id = f"{info.name}:{','.join(key or ())}"
            if key is None:
                raise harness.HarnessError(
                    f"{db.where(info.name, _by_values(info, values), info.primary_key[0])}: NULL in the primary key"
                )
            name = (scalar(values[name_column]) or "").strip() if name_column else ""
            node_fields = {c: value for c in fields if (value := text(values[c])) is not None}
            node = builder.add_node(node_id, info.name, name, node_fields, source, position)
            for columns, lookup in mine.items():
                found = _key([values[c] for c in columns])
                if found is not None:
                    lookup[found] = node
            for relation, fk in relations:
                found = _key([values[c] for c in fk.columns])
                if found is not None:  # NULL: no edge
                    pending.append((relation, node, fk, found, node_id, info.name))
        progress(total)


def _read_link_table(
    db: Database,
    builder: SKBBuilder,
    info: TableInfo,
    lookups: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], int]],
    track: Callable[..., Any],
) -> None:
    total = db.count(info.name)
    if not total:
        raise harness.HarnessError(
            f"{db.shown}, table {info.name!r}: no rows (an empty link table); leave it out with --exclude {info.name}"
        )
    first, second = info.foreign_keys
    relation = builder.relation(info.name, _words([info.name]), f"{first.target} ({_words([info.name])})")
    order = info.primary_key or info.columns
    with track(f"table {info.name}", total) as progress:
        for position, values in enumerate(db.rows(info, order), start=1):
            if position % 4096 == 0:
                progress(position)
            ends = []
            for fk in (first, second):
                key = _key([values[c] for c in fk.columns])
                if key is None:
                    break  # a NULL end joins nothing
                node = lookups[(fk.target, fk.target_columns)].get(key)
                if node is None:
                    if info.primary_key:
                        row = repr(f"{info.name}:{','.join(_key([values[c] for c in info.primary_key]) or ())}")
                    else:  # no key to name it by: its values
                        row = _by_values(info, values)
                    raise harness.HarnessError(
                        f"{db.where(info.name, row, ','.join(fk.columns))}: {','.join(key)} is no row of "
                        f"table {fk.target!r} (column {','.join(fk.target_columns)})"
                    )
                ends.append(node)
            if len(ends) == 2:
                builder.add_edge(ends[0], ends[1], relation)
        progress(total)
