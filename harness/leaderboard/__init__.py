"""The maintainers' workflow: leaderboard rows, submissions, validation, merging, migration
and publishing.

    rows.py      row files, the merged view, tables          (``harness leaderboard show``)
    bundles.py   finding runs, submission archives           (``harness submit``)
    validate.py  checking rows against their per-query results and the dataset
    merge.py     merging submissions in, withdrawing rows    (under the leaderboard lock)
    migrate.py   rewriting rows of an older schema
    publish.py   Markdown tables and the static site (views.py, site.py, web/)

Import from the modules (``from harness.leaderboard.validate import validate``). What only
publishing and analysis need is the ``leaderboard`` extra (``harness.errors.require`` names it):
``pip install 'stark-harness[leaderboard]'``.
"""

from __future__ import annotations

from harness.errors import require

__all__ = ["require"]
