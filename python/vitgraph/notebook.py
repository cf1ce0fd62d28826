"""Runs an analysis notebook as a vitgraph node (the `Notebook` task).

vitgraph runs this file with the node's Python interpreter, the job as the
one argument (a JSON object: `notebook`, `params`, `cwd`, `executed`,
`html`, `partial`, `status`). It needs nbformat, nbclient, ipykernel and
nbconvert (`pip install nbclient ipykernel nbconvert`); pandas and
matplotlib only as the notebook does.

1. The params are injected as a code cell tagged `injected-parameters`
   right after the cell tagged `parameters` (papermill's convention), or
   first when no cell has that tag; an injected cell from an earlier run
   (papermill's or this one's) is replaced.
2. The cells run in order in a Jupyter kernel (the notebook's kernelspec,
   `python3` when it names none) whose working directory is `cwd`.
3. The executed notebook is written to `executed`, and its HTML rendering
   (nbconvert's) to `html`.

A cell that raises stops the run: the notebook as far as it ran is written
to `partial`, and `status` gets a JSON object saying which cell failed, at
which line, with the error and its traceback. Every other failure (a
package missing, no such kernel, an unreadable notebook) writes `status`
too, with what to do about it. The exit status is 0 on success, 2 when a
cell failed, 3 otherwise.
"""

import json
import os
import re
import sys

INJECTED = "injected-parameters"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Where IPython's traceback points in a cell: `Cell In[3], line 2` (IPython
# 8 and later), else the first frame's `----> 2` arrow.
CELL_LINE = re.compile(r"Cell In\s*\[[^\]]*\],\s*line (\d+)|^-*> ?(\d+)", re.M)


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _status(job, **fields):
    _write(job["status"], json.dumps(fields))


def _tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def inject(nb, params, new_code_cell):
    """The notebook with `params` as an injected cell; the index it has."""
    nb.cells = [c for c in nb.cells if INJECTED not in _tags(c)]
    lines = ["# Parameters injected by vitgraph"]
    lines += ["%s = %r" % (name, value) for name, value in params.items()]
    cell = new_code_cell("\n".join(lines))
    cell.metadata["tags"] = [INJECTED]
    at = next(
        (i + 1 for i, c in enumerate(nb.cells) if "parameters" in _tags(c)), 0
    )
    nb.cells.insert(at, cell)
    return at


def _failed_line(traceback, source):
    """The line of the cell's source the traceback points at (1-based), if any."""
    text = ANSI.sub("", "\n".join(traceback))
    for m in CELL_LINE.finditer(text):
        n = int(m.group(1) or m.group(2))
        if 1 <= n <= len(source.splitlines()):
            return n
    return None


def _nbconvert_templates():
    """Lets nbconvert find its templates when it was installed with
    `pip install --target` (they sit beside the package, not under the
    interpreter's prefix)."""
    try:
        import nbconvert
    except ImportError:
        return
    share = os.path.join(os.path.dirname(os.path.dirname(nbconvert.__file__)), "share", "jupyter")
    if os.path.isdir(share):
        paths = os.environ.get("JUPYTER_PATH", "")
        if share not in paths.split(os.pathsep):
            os.environ["JUPYTER_PATH"] = share + (os.pathsep + paths if paths else "")


def run(job):
    import warnings

    # Cells without ids (notebooks older than nbformat 4.5) are run as they are.
    warnings.filterwarnings("ignore", message="Cell is missing an id field")
    try:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
        from nbconvert import HTMLExporter
    except ImportError as e:
        _status(
            job,
            kind="setup",
            message="running a notebook needs nbformat, nbclient, ipykernel and nbconvert in %s: %s"
            % (sys.executable, e),
            help="install them into the interpreter the node runs with: `%s -m pip install nbclient ipykernel nbconvert`"
            % sys.executable,
        )
        return 3
    try:
        nb = nbformat.read(job["notebook"], as_version=4)
    except Exception as e:  # nbformat raises several kinds
        _status(
            job,
            kind="setup",
            message="`%s` is not a notebook nbformat can read: %s" % (job["notebook"], e),
            help="open it in Jupyter and save it again, or restore it from version control",
        )
        return 3
    injected = inject(nb, job["params"], nbformat.v4.new_code_cell)
    kernel = nb.metadata.get("kernelspec", {}).get("name") or "python3"
    # The kernel talks over Unix sockets in a private folder, not TCP: on
    # a shared node no one else can reach it.
    import tempfile
    from jupyter_client.manager import KernelManager

    sockets = tempfile.mkdtemp(prefix="vitgraph-kernel-")
    km = KernelManager(kernel_name=kernel, transport="ipc", ip=os.path.join(sockets, "k"))
    client = NotebookClient(
        nb,
        km=km,
        timeout=None,
        kernel_name=kernel,
        resources={"metadata": {"path": job["cwd"]}},
    )
    try:
        return _execute(job, nb, client, injected, kernel, nbformat, CellExecutionError, HTMLExporter)
    finally:
        import shutil

        shutil.rmtree(sockets, ignore_errors=True)


def _execute(job, nb, client, injected, kernel, nbformat, CellExecutionError, HTMLExporter):
    code = 0
    try:
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code":
                    code += index != injected
                try:
                    client.execute_cell(cell, index)
                except CellExecutionError as e:
                    _write(job["partial"], nbformat.writes(nb))
                    tb = []
                    for out in cell.get("outputs", []):
                        if out.get("output_type") == "error":
                            tb = [ANSI.sub("", t) for t in out.get("traceback", [])]
                    line = _failed_line(tb, cell.source)
                    _status(
                        job,
                        kind="cell",
                        injected=index == injected,
                        cell=index + (index < injected),
                        code_cell=code,
                        line=line,
                        source=cell.source.splitlines()[line - 1] if line else None,
                        ename=getattr(e, "ename", type(e).__name__),
                        evalue=getattr(e, "evalue", str(e)),
                        traceback=tb,
                    )
                    return 2
    except Exception as e:  # no such kernel, a kernel that died
        _status(
            job,
            kind="setup",
            message="the notebook's kernel `%s` could not run it: %s: %s"
            % (kernel, type(e).__name__, e),
            help="check that the kernel is installed (`jupyter kernelspec list`) for %s, "
            "or set the notebook's kernel to `python3`" % sys.executable,
        )
        return 3
    _write(job["executed"], nbformat.writes(nb))
    _nbconvert_templates()
    try:
        body, _ = HTMLExporter().from_notebook_node(nb)
    except Exception as e:
        _status(
            job,
            kind="setup",
            message="nbconvert could not render the executed notebook as HTML: %s: %s"
            % (type(e).__name__, e),
            help="check nbconvert's installation (`%s -m jupyter nbconvert --to html` on any notebook)"
            % sys.executable,
        )
        return 3
    _write(job["html"], body)
    return 0


if __name__ == "__main__":
    sys.exit(run(json.loads(sys.argv[1])))
