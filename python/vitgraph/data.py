"""A study's results in Python: a report's table, and a stage's runs, as
DataFrames.

    import vitgraph
    df = vitgraph.table("rq1_report")              # pandas (the default)
    df = vitgraph.table("rq1_report", backend="polars")
    rows = vitgraph.table("rq1_report", backend="records")   # no dependency
    runs = vitgraph.runs("rq1_runs")                # one row per run (per member of a block)
    diff = vitgraph.compare("baseline:first", "HEAD")  # the rows of `vitgraph compare`

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
import datetime
import json
import operator
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


def status(stage, workspace=None, params=None):
    """The nodes of ``stage`` as ``vitgraph status STAGE --json`` gives them:
    a list of ``{"id", "stage", "state", "reasons"}``. ``params``: the
    ``-p`` overrides the study was built with (``{"batch": [1, 4]}``)."""
    root = find_workspace(workspace)
    nodes = _cli_json(["status", stage, "--json"] + _overrides(params), root, "nodes")
    return [n for n in nodes if n.get("stage") == stage]


def _overrides(params):
    """``-p KEY=VALUE`` arguments: a string as it is, anything else as JSON
    (numbers, booleans and lists read the same in RON)."""
    args = []
    for key, value in (params or {}).items():
        text = value if isinstance(value, str) else json.dumps(value)
        args += ["-p", f"{key}={text}"]
    return args


def _cli_json(args, root, what):
    run = subprocess.run([_executable(), "-C", root] + args, capture_output=True, text=True)
    if run.returncode not in (0, 1):
        raise VitgraphError(f"`vitgraph {' '.join(args)}` in {root} failed "
                            f"(exit {run.returncode}): {run.stderr.strip()}")
    try:
        return json.loads(run.stdout)[what]
    except (ValueError, KeyError) as e:
        raise VitgraphError(f"`vitgraph {' '.join(args)}` in {root} gave no {what}: {e}")


def _flatten(value, prefix, out, keep_text=False):
    """Numbers by dotted path (and text where ``keep_text``); lists left out."""
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{prefix}.{k}" if prefix else k, out, keep_text)
    elif isinstance(value, bool):
        return
    elif isinstance(value, (int, float)) or (keep_text and isinstance(value, str)):
        out[prefix] = value


def runs(stage, backend="pandas", workspace=None, params=None):
    """One row per node of ``stage`` whose run wrote a ``results.json``: its
    id, its params with their types, its state (``fresh`` or ``stale``) and
    the reasons, the host it was measured on when that is another host
    (``measured_elsewhere``, with ``signed_by``; None for a run measured
    here), its run's content key (``key``, hex), when it started
    (``started_at``, UTC, ISO 8601) and how long it ran (``duration_s``),
    its verdict (``validity.verdict`` where the run has one),
    its environment (``env.*``) and every number of its ``results.json`` by
    dotted path (``latency_ms.median``; per-batch lists are left out). The
    node ids and params come from ``vitgraph ls STAGE --json``, the states
    from ``vitgraph status STAGE --json`` (with ``params`` as ``-p``
    overrides, as for ``status``)."""
    root = find_workspace(workspace)
    nodes = _cli_json(["ls", stage, "--json"] + _overrides(params), root, "nodes")
    states = {n["id"]: n for n in status(stage, root, params)}
    rows = []
    for n in nodes:
        path = os.path.join(root, n["out"], "results.json")
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            try:
                doc = json.load(f)
            except ValueError as e:
                raise VitgraphError(f"{path} (node {n['id']}) is not JSON: {e}; "
                                    f"`vitgraph build {n['id']}` measures it again")
        st = states.get(n["id"], {})
        base = {"id": n["id"]}
        base.update(n["params"])
        base["state"] = st.get("state")
        base["reasons"] = "; ".join(f"{r['kind']}: {r['detail']}" for r in st.get("reasons", []))
        elsewhere = st.get("measured_elsewhere") or {}
        base["measured_elsewhere"] = elsewhere.get("host")
        base["signed_by"] = elsewhere.get("signed_by")
        run = n.get("run") or {}
        base["key"] = run.get("key")
        base["duration_s"] = run["duration_ms"] / 1000 if "duration_ms" in run else None
        base["started_at"] = (
            datetime.datetime.fromtimestamp(run["started_at_ms"] / 1000, datetime.timezone.utc)
            .isoformat(timespec="seconds") if "started_at_ms" in run else None)
        for params, member in _members(n, doc):
            row = dict(base)
            row.update(params)
            validity = member.get("validity") if isinstance(member, dict) else None
            row["verdict"] = validity.get("verdict") if isinstance(validity, dict) else None
            flat = {}
            for k, v in (member.items() if isinstance(member, dict) else []):
                if k == "validity":
                    continue
                _flatten(v, k, flat, keep_text=(k == "env"))
            row.update(flat)
            rows.append(row)
    return _frame(rows, backend)


def _key_part(value):
    """A value as it reads in a member's key (vitgraph's display)."""
    return value if isinstance(value, str) else json.dumps(value)


def _members(node, doc):
    """A run's rows: ``[({}, doc)]`` for one configuration; for a block
    measured together (``together`` in ``vitgraph ls --json``), one per
    member of its ``results.json``, with the member's values of the
    together axes as params and ``member`` its key (``NAME#2`` is the A/A
    twin, a second instance of the first member)."""
    together = node.get("together")
    if not together or not isinstance(doc, dict) or not isinstance(doc.get("members"), dict):
        return [({}, doc)]
    out = []
    for values in together["members"]:
        key = ",".join(_key_part(v) for v in values)
        member = doc["members"].get(key)
        if member is None:
            continue
        params = dict(zip(together["axes"], values))
        params["member"] = key
        out.append((params, member))
    return out


def compare(a, b, targets=(), metrics=(), threshold=None, backend="pandas", workspace=None):
    """The rows of ``vitgraph compare A B [TARGETS]`` (its ``--json``): one
    per configuration and metric, with each side's value, interval and
    runs (``a_value``, ``a_low``, ``a_high``, ``a_runs``, ``a_basis``;
    ``b_…``), the ratio B / A with its interval and basis, ``p``, the
    ``verdict`` (faster, slower, same, inconclusive, not comparable) and
    ``why`` where a pair cannot be compared. ``metrics``: dotted paths
    (``--metric``); ``threshold``: the equivalence margin (``"2%"``)."""
    root = find_workspace(workspace)
    args = ["compare", a, b] + list(targets)
    for m in metrics:
        args += ["--metric", m]
    if threshold is not None:
        args += ["--threshold", str(threshold)]
    rows = []
    for r in _cli_json(args + ["--json"], root, "rows"):
        row = {"config": r.get("config"), "stage": r.get("stage"), "metric": r.get("metric"),
               "better": r.get("better")}
        for side in ("a", "b"):
            for k, v in (r.get(side) or {}).items():
                row[f"{side}_{k}"] = v
        for k in ("ratio", "ratio_low", "ratio_high", "ratio_basis", "p", "verdict", "why"):
            row[k] = r.get(k)
        row["differs"] = "; ".join(f"{d['facet']} {d['a']} → {d['b']}" for d in r.get("differs") or [])
        rows.append(row)
    return _frame(rows, backend)


def _frame(rows, backend, names=None):
    """``rows`` (dicts) as a DataFrame of columns ``names`` (default: every
    key, in first-seen order), or as they are for ``"records"``."""
    if backend == "records":
        return rows
    if names is None:
        names = []
        for r in rows:
            names.extend(k for k in r if k not in names)
    columns = {k: [r.get(k) for r in rows] for k in names}
    if backend not in ("pandas", "polars"):
        raise VitgraphError(f"backend {backend!r}: choose \"pandas\", \"polars\" or \"records\"")
    try:
        module = __import__(backend)
    except ImportError:
        raise VitgraphError(f"backend=\"{backend}\" needs {backend} (`pip install {backend}`); "
                            "backend=\"records\" needs nothing") from None
    if backend == "pandas":
        return module.DataFrame(columns, columns=names)
    return module.DataFrame(columns, strict=False)


def _typed(values):
    """A column's cells with one type: int, float or str (None where empty)."""
    empty = "" in values
    if empty and not any(values):
        return [None] * len(values)
    for kind in (int, float):
        try:
            if not empty:
                return list(map(kind, values))
            return [kind(v) if v != "" else None for v in values]
        except ValueError:
            pass
    return [v if v != "" else None for v in values] if empty else list(values)


def _read_csv(path, backend="records"):
    """A report's ``table.csv`` as its header and typed columns. With pandas
    as the backend, pandas' parser splits the file (cells kept as text; the
    types are the same rules' either way)."""
    if backend == "pandas" and _has("pandas"):
        import pandas
        try:
            raw = pandas.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
        except pandas.errors.EmptyDataError:
            return [], []
        if len(set(raw.columns)) == len(raw.columns) and list(raw.columns) == _csv_header(path):
            return list(raw.columns), [_typed(raw[c].tolist()) for c in raw.columns]
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return [], []
        rows = list(reader)
    width = len(header)
    if any(len(r) != width for r in rows):
        rows = [(r + [""] * width)[:width] for r in rows]
    # Column by column through itemgetter: C speed, where zip(*rows) over
    # 100,000 rows takes longer than reading them.
    columns = [_typed(list(map(operator.itemgetter(i), rows))) for i in range(width)]
    return header, columns


def _csv_header(path):
    with open(path, newline="", encoding="utf-8") as f:
        return next(csv.reader(f), [])


def table(report, backend="pandas", stale_ok=False, workspace=None, source="auto", params=None):
    """The table of the report built by stage ``report``, as a DataFrame
    (``backend="pandas"`` or ``"polars"``) or a list of dicts
    (``"records"``). Read from its ``out/<report>/table.parquet`` when
    pyarrow is installed, from ``table.csv`` otherwise (``source="csv"`` or
    ``"parquet"`` picks one): the same columns and values either way.
    ``params``: the ``-p`` overrides the report was built with, as for
    ``status``."""
    root = find_workspace(workspace)
    nodes = status(report, root, params)
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
        if not params:
            fix += " (built with `-p` overrides? pass them as params={...})"
        raise VitgraphError(f"report `{report}` in {root} is {node['state']} ({why}): {fix}")
    if not built:
        raise VitgraphError(f"report `{report}` in {root} has no {path}: is `{report}` a `Report` stage?")
    if backend not in ("records", "pandas", "polars"):
        raise VitgraphError(f"backend {backend!r}: choose \"pandas\", \"polars\" or \"records\"")
    parquet = os.path.join(root, "out", report, "table.parquet")
    if source not in ("auto", "parquet", "csv"):
        raise VitgraphError(f"source {source!r}: choose \"auto\", \"parquet\" or \"csv\"")
    if source != "csv" and os.path.isfile(parquet) and (source == "parquet" or _has("pyarrow")):
        header, columns = _read_parquet(parquet)
    else:
        header, columns = _read_csv(path, backend)
    return _frame_of_columns(header, columns, backend)


def _frame_of_columns(header, columns, backend):
    """Typed ``columns`` (lists, in ``header``'s order) as a DataFrame, or as
    a list of dicts for ``"records"``: column by column, as they were read."""
    if backend == "records":
        return [dict(zip(header, row)) for row in zip(*columns)] if columns else []
    try:
        module = __import__(backend)
    except ImportError:
        raise VitgraphError(f"backend=\"{backend}\" needs {backend} (`pip install {backend}`); "
                            "backend=\"records\" needs nothing") from None
    data = dict(zip(header, columns))
    if backend == "pandas":
        return module.DataFrame(data, columns=header)
    return module.DataFrame(data, strict=False)


def _has(module):
    try:
        __import__(module)
        return True
    except ImportError:
        return False


def _read_parquet(path):
    """The header and rows of a report's ``table.parquet`` (needs pyarrow):
    the same columns and values as its ``table.csv``, typed by the file."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise VitgraphError(f"reading {path} needs pyarrow (`pip install pyarrow`); "
                            "source=\"csv\" reads the table.csv beside it") from None
    try:
        t = pq.read_table(path)
    except Exception as e:  # pyarrow raises several kinds for a damaged file
        raise VitgraphError(f"{path} cannot be read as Parquet ({e}); source=\"csv\" reads "
                            "the table.csv beside it, or `vitgraph build --force` rebuilds it") from None
    return t.column_names, [c.to_pylist() for c in t.columns]
