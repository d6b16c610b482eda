"""Large CSV and TSV tables read whole: pyarrow parses them (in C++, on every core) while the
row reader in ``tables.py`` stays what defines the format and names faults.

:func:`read_columns` gives every column as text, or None where it cannot promise exactly what
the row reader reads: a parse error, a row with more or fewer cells than the header, bytes that
are not UTF-8, quoting the row reader refuses (pyarrow reads ``"Salt" Road`` as ``Salt Road``
and an unterminated quote as one long cell; Python's strict ``csv`` refuses both). The caller
then reads the table row by row, which raises the error naming the row (or, for a short row,
which is valid, reads it): slow only where the input is at fault or unusual.
"""

from __future__ import annotations

import csv
import mmap
from typing import TYPE_CHECKING

from harness_formats.tables import Table, _dialect

if TYPE_CHECKING:
    import pyarrow as pa

#: bytes pyarrow parses per block (per thread): large blocks, fewer chunks to stitch
BLOCK = 1 << 24


def read_columns(table: Table) -> pa.Table | None:
    """Every column of a CSV or TSV table as strings (empty cells ""), in row order, blank
    lines left out as the row reader leaves them; None where the row reader must read it."""
    if table.delimiter is None:
        return None
    import pyarrow as pa
    import pyarrow.csv as pacsv

    if table.delimiter == ",":
        parse = pacsv.ParseOptions(delimiter=",", quote_char='"', double_quote=True, newlines_in_values=True)
    else:  # TSV: no quoting (see tables._dialect), so no line breaks inside cells either
        parse = pacsv.ParseOptions(delimiter="\t", quote_char=False)
    # the header as the row reader read it (names stripped); every column is text
    read = pacsv.ReadOptions(column_names=table.columns, skip_rows=1, block_size=BLOCK)
    convert = pacsv.ConvertOptions(column_types=dict.fromkeys(table.columns, pa.string()), strings_can_be_null=False)
    try:
        result = pacsv.read_csv(table.path, read, parse, convert)
    except (pa.ArrowException, OSError, ValueError):
        return None
    if table.delimiter == "," and _has_quote(table) and _records(table) != result.num_rows:
        return None
    return result


def _has_quote(table: Table) -> bool:
    """Whether a CSV file holds a quote at all: without one, pyarrow and Python's csv split
    every line the same way, so the strict check below is not needed (edge tables rarely quote)."""
    with table.path.open("rb") as raw:
        if not table.total:
            return False
        with mmap.mmap(raw.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b'"') >= 0


def _records(table: Table) -> int:
    """The rows Python's strict csv reader reads (blank lines left out); -1 where it refuses the
    file. Its C loop alone, nothing kept: the check that pyarrow's leniency changed nothing."""
    assert table.delimiter is not None
    try:
        with table.path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, **_dialect(table.delimiter))
            next(reader, None)
            return sum(1 for values in reader if values)
    except (csv.Error, UnicodeDecodeError, OSError):
        return -1


def row_number(table: Table, index: int) -> int:
    """The row (as a spreadsheet numbers it, the header row 1) of the ``index``-th row
    :func:`read_columns` gave: blank lines count there, and a cell may hold line breaks. Read
    only for an error's words."""
    assert table.delimiter is not None
    seen = 0
    with table.path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle, **{**_dialect(table.delimiter), "strict": False})
        next(reader, None)
        for number, values in enumerate(reader, start=2):
            if values:
                if seen == index:
                    return number
                seen += 1
    return index + 2
