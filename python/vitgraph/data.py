"""A study's results in Python: a report's table as a DataFrame.

    import vitgraph
    df = vitgraph.table("rq1_report")              # pandas (the default)
    df = vitgraph.table("rq1_report", backend="polars")
    rows = vitgraph.table("rq1_report", backend="records")   # no dependency

From any folder inside a workspace (the nearest ancestor with
``pipelines/``). The report's state comes from the CLI (``vitgraph status
--json``), the one reader of the store: a report that is stale or was never
built is an error that says so and how to build it, unless ``stale_ok=True``
(then the rows of its last build). Columns keep their types: a column whose
every cell is a whole number is ``int``, one of numbers ``float``, otherwise
``str``; an empty cell is ``None`` (``NaN`` in a pandas float column).

The ``vitgraph`` executable is ``$VITGRAPH`` when set, else ``vitgraph`` on
the ``PATH``.
"""

import csv
import json
import os
import shutil
import subprocess


class VitgraphError(Exception):
    """A study's data could not be given: the message names the workspace,
    the stage and the fix."""


def find_workspace(start=None):
    """The workspace holding ``start`` (default: the current folder): the
    nearest ancestor with a ``pipelines/`` folder."""
    here = os.path.abspath(start or os.getcwd())
    while True:
        if os.path.isdir(os.path.join(here, "pipelines")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise VitgraphError(
                f"{os.path.abspath(start or os.getcwd())} is in no vitgraph workspace "
                "(no folder above it has `pipelines/`): change into the study's folder, "
                "or pass workspace=PATH")
        here = parent


def _executable():
    exe = os.environ.get("VITGRAPH") or shutil.which("vitgraph")
    if not exe:
        raise VitgraphError(
            "the `vitgraph` executable is not on the PATH: set VITGRAPH=/path/to/vitgraph "
            "or add its folder to the PATH")
    return exe


def status(stage, workspace=None):
    """The nodes of ``stage`` as ``vitgraph status STAGE --json`` gives them:
    a list of ``{"id", "stage", "state", "reasons"}``."""
    root = find_workspace(workspace)
    run = subprocess.run([_executable(), "-C", root, "status", stage, "--json"],
                         capture_output=True, text=True)
    if run.returncode not in (0, 1):
        raise VitgraphError(f"`vitgraph status {stage}` in {root} failed "
                            f"(exit {run.returncode}): {run.stderr.strip()}")
    try:
        nodes = json.loads(run.stdout)["nodes"]
    except (ValueError, KeyError) as e:
        raise VitgraphError(f"`vitgraph status {stage} --json` in {root} gave no node list: {e}")
    return [n for n in nodes if n.get("stage") == stage]


def _typed(values):
    """A column's cells with one type: int, float or str (None where empty)."""
    present = [v for v in values if v != ""]

    def all_parse(kind):
        try:
            for v in present:
                kind(v)
            return True
        except ValueError:
            return False

    if present and all_parse(int):
        return [int(v) if v != "" else None for v in values]
    if present and all_parse(float):
        return [float(v) if v != "" else None for v in values]
    return [v if v != "" else None for v in values]


def _read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return [], []
        rows = list(reader)
    columns = [_typed([r[i] if i < len(r) else "" for r in rows]) for i in range(len(header))]
    return header, columns


def table(report, backend="pandas", stale_ok=False, workspace=None):
    """The table of the report built by stage ``report`` (its
    ``out/<report>/table.csv``), as a DataFrame (``backend="pandas"`` or
    ``"polars"``) or a list of dicts (``"records"``)."""
    root = find_workspace(workspace)
    nodes = status(report, root)
    if not nodes:
        raise VitgraphError(
            f"workspace {root} has no stage `{report}`: `vitgraph ls` lists its stages")
    node = nodes[0]
    path = os.path.join(root, "out", report, "table.csv")
    built = os.path.isfile(path)
    if node["state"] != "fresh" and not (stale_ok and built):
        why = "; ".join(f"{r['kind']}: {r['detail']}" for r in node.get("reasons", [])) or node["state"]
        fix = f"`vitgraph build {report}` in {root} brings it up to date"
        if built:
            fix += ", or pass stale_ok=True for the rows of its last build"
        raise VitgraphError(f"report `{report}` in {root} is {node['state']} ({why}): {fix}")
    if not built:
        raise VitgraphError(f"report `{report}` in {root} has no {path}: is `{report}` a `Report` stage?")
    header, columns = _read_csv(path)
    if backend == "records":
        return [dict(zip(header, row)) for row in zip(*columns)] if columns else []
    if backend == "pandas":
        try:
            import pandas as pd
        except ImportError:
            raise VitgraphError("backend=\"pandas\" needs pandas (`pip install pandas`); "
                                "backend=\"records\" needs nothing") from None
        return pd.DataFrame({name: col for name, col in zip(header, columns)}, columns=header)
    if backend == "polars":
        try:
            import polars as pl
        except ImportError:
            raise VitgraphError("backend=\"polars\" needs polars (`pip install polars`); "
                                "backend=\"records\" needs nothing") from None
        return pl.DataFrame({name: col for name, col in zip(header, columns)}, strict=False)
    raise VitgraphError(f"backend {backend!r}: choose \"pandas\", \"polars\" or \"records\"")
