"""vitgraph's Python side.

``vitgraph.measure`` times several configurations in one process, in
shuffled blocks, and writes the ``results.json`` a stage with ``together``
expects (``{"members": {"<value>": {...}}}``). Pure Python: the standard
library, and torch where it times on a GPU.
"""

from .measure import measure_together, summarize, write_results

__all__ = ["measure_together", "summarize", "write_results"]
