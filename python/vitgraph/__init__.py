"""vitgraph's Python side.

``vitgraph.measure`` times several configurations in one process, in
shuffled blocks, and writes the ``results.json`` a stage with ``together``
expects (``{"members": {"<value>": {...}}}``). ``vitgraph.table`` gives a
report's table as a DataFrame, ``vitgraph.runs`` a stage's runs and
``vitgraph.compare`` the rows of ``vitgraph compare`` (``vitgraph.data``). Pure Python: the
standard library, torch where it times on a GPU, pandas or polars where a
DataFrame is asked for.
"""

from .data import VitgraphError, compare, runs, status, table
from .measure import measure_together, summarize, write_results

__all__ = ["VitgraphError", "compare", "measure_together", "runs", "status", "summarize", "table", "write_results"]
