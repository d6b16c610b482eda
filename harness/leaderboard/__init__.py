"""The maintainers' workflow: leaderboard rows, submissions, validation, merging, migration,
publishing and reproduction.

    rows.py      row files, the merged view, tables          (``harness leaderboard show``)
    bundles.py   finding runs, submission archives           (``harness submit``)
    validate.py  checking rows against their per-query results and the dataset
    merge.py     merging submissions in, withdrawing rows    (under the leaderboard lock)
    migrate.py   rewriting rows of an older schema
    reproduce.py re-running rows from what they record      (``harness leaderboard reproduce``, ``regenerate``)
    publish.py   Markdown tables and the static site (views.py, site.py, web/)

Import from the modules (``from harness.leaderboard.validate import validate``); the commands
that reproduce a row, which the site shows, are here too (``reproduce_command``,
``run_command``). What only publishing and analysis need is the ``leaderboard`` extra
(``harness.errors.require`` names it): ``pip install 'stark-harness[leaderboard]'``.
"""

from __future__ import annotations

from harness.errors import require
from harness.leaderboard.reproduce import reproduce_command, run_command

__all__ = ["reproduce_command", "require", "run_command"]
