#!/usr/bin/env python3
"""Archive benchmark: a `files:` stage over N trace files against a matrix
stage of N nodes, the same work otherwise.

Both workspaces have N nodes, each reading one small file (the archive's
node its matched file; the matrix node `inputs: ["data/<i>.txt"]`) and
copying it to its output, with the files in 100 folders. For each, in the
same run (medians of --repeat):

  status (cold)   `vitgraph status` before anything was built
  no-op build     everything up to date, files settled (answered by the
                  no-op snapshot when it holds)
  status          `status` on the built, settled workspace
  changed status  `status` after one file's content changed
  changed build   the build after one file changed (one node runs)
  added status    `status` after a new file appeared (archive) / a new
                  matrix value (matrix: the pipeline file changes)

Usage: scripts/bench_archive.py [--n 10000] [--repeat 7] [--vitgraph target/release/vitgraph]
Prints a markdown table with the archive/matrix ratio.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

DIRS = 100


def run(cmd, cwd):
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {cmd}\n{r.stderr.decode()[-2000:]}")
    return dt


def settle(root):
    """Dates every file and folder back 10 s, as if written long ago."""
    past = time.time() - 10
    for d, dirs, files in os.walk(root):
        if os.path.basename(d) == "cache" or "/cache/" in d + "/":
            continue
        for f in files:
            os.utime(os.path.join(d, f), (past, past))
        os.utime(d, (past, past))


def data_path(i):
    """File i of the archive: folder d = i % 100, name f<k> with k = i // 100."""
    return f"d{i % DIRS}/f{i // DIRS}.txt"


def archive_ws(root, n):
    os.makedirs(os.path.join(root, "pipelines"))
    for i in range(n):
        p = os.path.join(root, "archive", data_path(i))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(f"{i}\n")
    with open(os.path.join(root, "pipelines", "a.ron"), "w") as f:
        f.write('Pipeline(stages: { "conv": Stage(files: "archive/d{d}/f{k}.txt", '
                'task: Command(run: "cp ${file} ${out}/o.txt", outputs: ["o.txt"])) })\n')


def matrix_ws(root, n, extra=0):
    """The same files as a matrix over d × k; `extra` more as include entries."""
    os.makedirs(os.path.join(root, "pipelines"), exist_ok=True)
    for i in range(n + extra):
        p = os.path.join(root, "archive", data_path(i))
        os.makedirs(os.path.dirname(p), exist_ok=True)
        if not os.path.exists(p):
            with open(p, "w") as f:
                f.write(f"{i}\n")
    ds = ", ".join(str(d) for d in range(DIRS))
    ks = ", ".join(str(k) for k in range(n // DIRS))
    inc = ", ".join('{"d": %d, "k": %d}' % (i % DIRS, i // DIRS) for i in range(n, n + extra))
    with open(os.path.join(root, "pipelines", "m.ron"), "w") as f:
        f.write('Pipeline(stages: { "conv": Stage(matrix: { "d": [' + ds + '], "k": [' + ks + '] }, '
                'include: [' + inc + '], '
                'task: Command(run: "cp archive/d${d}/f${k}.txt ${out}/o.txt", '
                'inputs: ["archive/d${d}/f${k}.txt"], outputs: ["o.txt"])) })\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--vitgraph", default="target/release/vitgraph")
    args = ap.parse_args()
    vg = os.path.abspath(args.vitgraph)
    n, rep = args.n, args.repeat
    results = {}
    for kind in ["matrix", "archive"]:
        root = tempfile.mkdtemp(prefix=f"vg-bench-{kind}-")
        try:
            if kind == "archive":
                archive_ws(root, n)
            else:
                matrix_ws(root, n)
            r = {}
            r["status (cold)"] = run([vg, "status"], root)
            t = time.perf_counter()
            run([vg, "build", "-j", "2"], root)
            r["cold build"] = time.perf_counter() - t
            settle(root)
            run([vg, "build"], root)  # writes the no-op snapshot
            r["no-op build"] = statistics.median(run([vg, "build"], root) for _ in range(rep))
            r["status"] = statistics.median(run([vg, "status"], root) for _ in range(rep))
            changed = os.path.join(root, "archive", data_path(n // 2))
            ch_status, ch_build = [], []
            for k in range(rep):
                with open(changed, "w") as f:
                    f.write(f"changed {k}\n")
                past = time.time() - 10
                os.utime(changed, (past, past))
                ch_status.append(run([vg, "status"], root))
                ch_build.append(run([vg, "build"], root))
                run([vg, "build"], root)  # the snapshot again
            r["changed status"] = statistics.median(ch_status)
            r["changed build"] = statistics.median(ch_build)
            add_status = []
            for k in range(rep):
                if kind == "archive":
                    p = os.path.join(root, "archive", data_path(n + k))
                    with open(p, "w") as f:
                        f.write("new\n")
                else:
                    matrix_ws(root, n, extra=k + 1)
                add_status.append(run([vg, "status"], root))
            r["added status"] = statistics.median(add_status)
            results[kind] = r
        finally:
            shutil.rmtree(root, ignore_errors=True)
    print(f"{n} nodes, {os.cpu_count()} CPUs, medians of {rep}\n")
    print("| | matrix | archive (`files`) | archive / matrix |")
    print("|---|---|---|---|")
    for key in results["matrix"]:
        m, a = results["matrix"][key], results["archive"][key]
        print(f"| {key} | {m * 1e3:.0f} ms | {a * 1e3:.0f} ms | {a / m:.2f} |")


if __name__ == "__main__":
    main()
