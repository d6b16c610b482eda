"""The maintainers' workflow: leaderboard rows, submissions, validation, merging, migration,
publishing and reproduction.

    rows.py      row files, the merged view, tables          (``harness leaderboard show``)
    bundles.py   finding runs, submission archives           (``harness submit``)
    validate.py  checking rows against their per-query results and the dataset
    merge.py     merging submissions in, withdrawing rows    (under the leaderboard lock)
    migrate.py   rewriting rows of an older schema
    reproduce.py re-running rows from what they record      (``harness leaderboard reproduce``)
    regenerate.py re-running every row of a leaderboard    (``harness leaderboard regenerate``)
    publish.py   Markdown tables and the static site (views.py, site.py, web/)

Import from the modules (``from harness.leaderboard.validate import validate``); the commands
that reproduce a row, which the site shows, are here too (``reproduce_command``,
``run_command``), loaded on first use: they live beside the runner and numpy, which
``harness leaderboard show`` (rows.py) must not load. What only publishing and analysis need is
the ``leaderboard`` extra (``harness.errors.require`` names it):
``pip install 'stark-harness[leaderboard]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.errors import require
from harness.io import lazy_exports

#: public name -> module it lives in, imported on first use (as ``harness`` does its exports)
_LAZY = {"reproduce_command": "harness.leaderboard.reproduce", "run_command": "harness.leaderboard.reproduce"}

__all__ = ["reproduce_command", "require", "run_command"]


__getattr__ = lazy_exports("harness.leaderboard", _LAZY, globals())


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # for type checkers; at runtime the names load on first use
    from harness.leaderboard.reproduce import reproduce_command, run_command
