"""Reading node, edge and query tables: CSV, JSON Lines and Parquet, chosen by extension.

Every reader yields ``(row, values)``: ``row`` is the number a spreadsheet shows for that row
(the header is row 1, so the first data row is row 2; in JSON Lines, which has no header, the
line number), and ``values`` maps column names to Python values. Values are turned into text
by :func:`text`, so that the same table in any of the formats gives the same strings.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

import harness

SUFFIXES = {".csv": "CSV", ".tsv": "TSV", ".jsonl": "JSON Lines", ".ndjson": "JSON Lines", ".parquet": "Parquet"}
#: how often (in rows) a reader reports its position to a progress bar
REPORT_EVERY = 4096

Progress = Callable[[int], None]  # called with the position so far (bytes or rows, see Table.unit)


@dataclass
class Table:
    """A table file opened for reading: its columns, its size, and its rows on demand."""

    path: Path
    columns: list[str]
    total: int  # in ``unit``s: bytes for text files, rows for Parquet
    unit: str
    _rows: Callable[[Progress], Iterator[tuple[int, dict[str, Any]]]]
    delimiter: str | None = None  # CSV and TSV: what separates cells (the whole-table reader needs it)
    row_word: str = field(init=False)  # what errors call a row: "line" in JSON Lines

    def __post_init__(self) -> None:
        self.row_word = "line" if self.path.suffix.lower() in (".jsonl", ".ndjson") else "row"

    def rows(self, progress: Progress = lambda _: None) -> Iterator[tuple[int, dict[str, Any]]]:
        return self._rows(progress)

    def where(self, row: int, column: str) -> str:
        """``file, row N, column 'c'``: where a value is, in the words errors use."""
        return f"{self.path}, {self.row_word} {row}, column {column!r}"

    def require(self, columns: dict[str, str]) -> None:
        """Raise one error naming every missing column (``columns``: column → the option that
        names it) and the columns present."""
        missing = [f"{column!r} ({option})" for column, option in columns.items() if column not in self.columns]
        if missing:
            raise harness.HarnessError(
                f"{self.path}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
                f"its columns: {', '.join(self.columns) or 'none'}"
            )


def open_table(path: str | Path) -> Table:
    path = Path(path)
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise harness.HarnessError(
            f"{path}: unknown table format {path.suffix or '(no extension)'!r}; "
            f"expected one of {', '.join(sorted(SUFFIXES))}"
        )
    if not path.is_file():
        raise harness.HarnessError(f"{path}: no such file")
    if kind in ("CSV", "TSV"):
        table = _csv(path, "\t" if kind == "TSV" else ",")
    elif kind == "JSON Lines":
        table = _jsonl(path)
    else:
        table = _parquet(path)
    duplicated = sorted({c for c in table.columns if table.columns.count(c) > 1})
    if duplicated:
        raise harness.HarnessError(f"{path}, row 1: column names repeated: {', '.join(map(repr, duplicated))}")
    return table


def _dialect(delimiter: str) -> dict[str, Any]:
    """CSV: RFC 4180 quoting, strictly (a stray quote is an error, not rows silently merged).
    TSV: no quoting at all, as MS MARCO's and BEIR's files are written (their texts hold bare
    quotes), so a cell cannot hold a tab or a line break."""
    if delimiter == "\t":
        return {"delimiter": delimiter, "quoting": csv.QUOTE_NONE}
    return {"delimiter": delimiter, "strict": True}


def _csv(path: Path, delimiter: str) -> Table:
    dialect = _dialect(delimiter)
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            header = next(csv.reader(handle, **dialect), None)
    except UnicodeDecodeError:
        raise harness.HarnessError(_not_utf8(path, dialect)) from None
    except (OSError, csv.Error) as exc:
        raise harness.HarnessError(f"{path}, row 1: cannot read the header: {exc}") from None
    if not header:
        raise harness.HarnessError(f"{path}: empty file (no header row)")
    header = [name.strip() for name in header]

    def rows(progress: Progress) -> Iterator[tuple[int, dict[str, Any]]]:
        number = 1
        try:
            with path.open("rb") as raw:
                reader = csv.reader(io.TextIOWrapper(raw, encoding="utf-8-sig", newline=""), **dialect)
                next(reader)
                for number, values in enumerate(reader, start=2):
                    if number % REPORT_EVERY == 0:
                        progress(raw.tell())
                    if not values:
                        continue  # a blank line: a row a spreadsheet shows empty
                    if len(values) > len(header):
                        raise harness.HarnessError(
                            f"{path}, row {number}: {len(values)} values, but the header names {len(header)} columns"
                        )
                    yield number, dict(zip(header, values, strict=False))
                progress(raw.tell())
        except UnicodeDecodeError:
            # decoding runs ahead of the rows read, so the row is found from the byte at fault
            raise harness.HarnessError(_not_utf8(path, dialect)) from None
        except csv.Error as exc:
            raise harness.HarnessError(f"{path}, row {number + 1}: {exc}") from None

    return Table(path, header, path.stat().st_size, "bytes", rows, delimiter)


def _jsonl(path: Path) -> Table:
    # One pass collects the columns (keys in order of first appearance) and the records.
    records: list[tuple[int, dict[str, Any]]] = []
    columns: dict[str, None] = {}
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:  # line by line, so that an error names the line
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise harness.HarnessError(f"{path}, line {number}: not UTF-8 text: {exc}") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise harness.HarnessError(f"{path}, line {number}: not JSON: {exc}") from None
            if not isinstance(record, dict):
                raise harness.HarnessError(
                    f"{path}, line {number}: a JSON object was expected, got {type(record).__name__}"
                )
            columns.update(dict.fromkeys(record))
            records.append((number, record))

    def rows(progress: Progress) -> Iterator[tuple[int, dict[str, Any]]]:
        for done, record in enumerate(records, start=1):
            if done % REPORT_EVERY == 0:
                progress(done)
            yield record
        progress(len(records))

    return Table(path, list(columns), len(records), "rows", rows)


def _not_utf8(path: Path, dialect: dict[str, Any]) -> str:
    """The error for a text table that is not UTF-8, naming the row of the first bad byte."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    fed = 0
    with path.open("rb") as raw:
        while chunk := raw.read(1 << 20):
            start = fed - len(decoder.getstate()[0])  # bytes held back from the last chunk
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                offset, reason = start + exc.start, exc.reason
                break
            fed += len(chunk)
        else:
            return f"{path}: not UTF-8 text"
        raw.seek(0)
        before = raw.read(offset).decode("utf-8-sig")
    # the rows before the bad byte, read as the reader reads them (the last one may be cut short)
    rows = sum(1 for _ in csv.reader(io.StringIO(before, newline=""), **{**dialect, "strict": False}))
    row = rows + 1 if not before or before.endswith(("\n", "\r")) else rows
    return f"{path}, row {row}: not UTF-8 text: byte {offset} ({reason})"


def _parquet(path: Path) -> Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        handle = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise harness.HarnessError(f"{path}: not a Parquet file: {exc}") from None
    columns = list(handle.schema_arrow.names)

    def rows(progress: Progress) -> Iterator[tuple[int, dict[str, Any]]]:
        number = 1  # row 1 is the header a spreadsheet would show
        for batch in handle.iter_batches(batch_size=REPORT_EVERY):
            for record in batch.to_pylist():
                number += 1
                yield number, record
            progress(number - 1)

    return Table(path, columns, handle.metadata.num_rows, "rows", rows)


def text(value: Any) -> str | list[str] | None:
    """A cell as a field value: text, a list of texts (JSON / Parquet lists), or None when empty."""
    if isinstance(value, list | tuple):
        items = [item for item in (scalar(v) for v in value) if item]
        return items or None
    result = scalar(value)
    return result or None


def scalar(value: Any) -> str | None:
    """One value as text, written the way a CSV file would hold it; None for null and NaN."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        # as JSON writes it (1.0 stays "1.0"), the text a CSV file holding that number would have
        return None if math.isnan(value) else repr(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)
