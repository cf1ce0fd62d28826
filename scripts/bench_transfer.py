#!/usr/bin/env python3
"""Carrying a study's results between machines: vitgraph against cp -a,
rsync and DVC, in one run.

The study: --configs measured configurations (default 1,000), each writing
--files small files (default 10: eight 2 kB kernel tables, a 64 kB trace, a
results.json), and one report over them; about configs * files objects.
Measured, each --repeat times in alternation, medians:

  vitgraph export / import       the whole study into one file, and into a
                                 fresh workspace's store
  export --results-only          only what the study's table (a Report over
                                 the runs) reads: each run's results.json;
                                 its import, and the build of the table
  vitgraph push / pull           to an empty directory remote, and from it
                                 into a fresh workspace; then each again
                                 with nothing new (the no-change case)
  vitgraph pull + build          the pull and the restore into out/ (what
                                 `dvc pull` does: objects and checkout)
  cp -a cache/, rsync -a cache/  copying the store whole
  dvc push / pull                the same output files as one tracked
                                 folder (`dvc add`), to a local remote and
                                 back into a clone with an empty cache;
                                 then each again with nothing new

Usage: scripts/bench_transfer.py [--vitgraph target/release/vitgraph]
                                 [--configs 1000] [--files 10] [--repeat 3]
                                 [--dvc PATH_TO_dvc]
Prints a markdown table. DVC and rsync rows are left out when the tool is
not found (`pip install dvc`).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def sh(cmd, cwd, env=None):
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env={**os.environ, "VITGRAPH_NO_PROGRESS": "1", **(env or {})})
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr.decode()[-2000:]}")
    return dt


def study(configs, files):
    kernels = " ".join(str(k) for k in range(files - 2))
    outputs = ", ".join([f'"k{k}.csv"' for k in range(files - 2)] + ['"trace.json"', '"results.json"'])
    run = (f"for k in {kernels}; do head -c 2048 /dev/urandom > ${{out}}/k$k.csv; done; "
           "head -c 65536 /dev/urandom > ${out}/trace.json; "
           "echo '{\\\"latency_ms\\\": {\\\"median\\\": ${i}}}' > ${out}/results.json")
    values = ", ".join(str(i) for i in range(configs))
    return f"""Pipeline(stages: {{
  "runs": Stage(matrix: {{"i": [{values}]}},
    task: Command(run: "{run}", outputs: [{outputs}], measure: true)),
  "report": Stage(needs: ["runs"],
    task: Command(run: "ls ${{needs.runs}} | wc -l > ${{out}}/n.txt", outputs: ["n.txt"])),
  "table": Stage(needs: ["runs"],
    task: Report(title: "Latency", sources: ["runs"], columns: ["latency_ms.median"])),
}})
"""


def workspace(path, pipeline, remote):
    os.makedirs(os.path.join(path, "pipelines"))
    with open(os.path.join(path, "pipelines", "study.ron"), "w") as f:
        f.write(pipeline)
    with open(os.path.join(path, "vitgraph.ron"), "w") as f:
        f.write(f'Workspace(remotes: {{"lab": Remote(path: "{remote}")}})\n')


def size_of(path):
    total = 0
    for root, _, names in os.walk(path):
        for n in names:
            total += os.lstat(os.path.join(root, n)).st_size
    return total


def count_files(path):
    return sum(len(names) for _, _, names in os.walk(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vitgraph", default="target/release/vitgraph")
    ap.add_argument("--configs", type=int, default=1000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dvc", default=shutil.which("dvc"))
    args = ap.parse_args()
    vg = os.path.abspath(args.vitgraph)
    rsync = shutil.which("rsync")
    top = tempfile.mkdtemp(prefix="bench-transfer-", dir=os.environ.get("BENCH_DIR"))
    pipeline = study(args.configs, args.files)
    src = os.path.join(top, "gpu")
    workspace(src, pipeline, os.path.join(top, "unused"))
    t_build = sh([vg, "-C", src, "build"], top)
    objects = count_files(os.path.join(src, "cache", "objects"))
    store_bytes = size_of(os.path.join(src, "cache"))
    print(f"study: {args.configs} configurations x {args.files} files; built in {t_build:.1f} s; "
          f"{objects} objects, cache/ {store_bytes / 1e6:.1f} MB", file=sys.stderr)

    # The DVC project: the same output files, tracked as one folder.
    if args.dvc:
        proj = os.path.join(top, "dvc-src")
        os.makedirs(proj)
        shutil.copytree(os.path.join(src, "out"), os.path.join(proj, "data"))
        sh(["git", "init", "-q"], proj)
        sh([args.dvc, "init", "-q"], proj)
        t_add = sh([args.dvc, "add", "-q", "data"], proj)
        print(f"dvc add data: {t_add:.1f} s", file=sys.stderr)

    rows = {}

    def note(name, dt, extra=""):
        rows.setdefault(name, ([], extra))[0].append(dt)

    for r in range(args.repeat):
        rd = os.path.join(top, f"r{r}")
        os.makedirs(rd)
        bundle = os.path.join(rd, "study.vgb")
        note("vitgraph export", sh([vg, "-C", src, "export", "-o", bundle], rd),
             f"{os.path.getsize(bundle) / 1e6:.1f} MB file")
        dst = os.path.join(rd, "laptop-import")
        workspace(dst, pipeline, os.path.join(rd, "unused"))
        note("vitgraph import", sh([vg, "-C", dst, "import", bundle], rd))

        small = os.path.join(rd, "results.vgb")
        note("vitgraph export table --results-only",
             sh([vg, "-C", src, "export", "table", "--results-only", "-o", small], rd),
             f"{os.path.getsize(small) / 1e6:.2f} MB file")
        dst = os.path.join(rd, "laptop-results")
        workspace(dst, pipeline, os.path.join(rd, "unused"))
        note("vitgraph import (results only)", sh([vg, "-C", dst, "import", small], rd))
        note("vitgraph build table after it (restore, nothing measured)",
             sh([vg, "-C", dst, "build", "table"], rd))

        remote = os.path.join(rd, "remote")
        with open(os.path.join(src, "vitgraph.ron"), "w") as f:
            f.write(f'Workspace(remotes: {{"lab": Remote(path: "{remote}")}})\n')
        note("vitgraph push", sh([vg, "-C", src, "push"], rd), f"{count_files(os.path.join(remote, 'objects'))} objects")
        note("vitgraph push, no change", sh([vg, "-C", src, "push"], rd))
        lap = os.path.join(rd, "laptop-pull")
        workspace(lap, pipeline, remote)
        note("vitgraph pull", sh([vg, "-C", lap, "pull"], rd))
        note("vitgraph pull, no change", sh([vg, "-C", lap, "pull"], rd))
        note("vitgraph build after pull (restore into out/)", sh([vg, "-C", lap, "build"], rd))

        note("cp -a cache/", sh(["cp", "-a", os.path.join(src, "cache"), os.path.join(rd, "cp-cache")], rd))
        if rsync:
            note("rsync -a cache/", sh([rsync, "-a", os.path.join(src, "cache") + "/", os.path.join(rd, "rsync-cache")], rd))
            note("rsync -a cache/, no change", sh([rsync, "-a", os.path.join(src, "cache") + "/", os.path.join(rd, "rsync-cache")], rd))

        if args.dvc:
            droot = os.path.join(rd, "dvc-remote")
            sh([args.dvc, "remote", "add", "-f", "-d", "lab", droot], proj)
            note("dvc push", sh([args.dvc, "push", "-q"], proj))
            note("dvc push, no change", sh([args.dvc, "push", "-q"], proj))
            clone = os.path.join(rd, "dvc-clone")
            shutil.copytree(proj, clone, ignore=shutil.ignore_patterns("data", "cache", "tmp"))
            note("dvc pull (objects and checkout)", sh([args.dvc, "pull", "-q"], clone))
            note("dvc pull, no change", sh([args.dvc, "pull", "-q"], clone))
        shutil.rmtree(rd)

    print(f"\n{args.configs} configurations x {args.files} files ({objects} objects, "
          f"cache/ {store_bytes / 1e6:.1f} MB), medians of {args.repeat}\n")
    print("| operation | median s | runs (s) | note |")
    print("| --- | ---: | --- | --- |")
    for name, (times, extra) in rows.items():
        runs = ", ".join(f"{t:.2f}" for t in times)
        print(f"| {name} | {statistics.median(times):.2f} | {runs} | {extra} |")

    def med(name):
        return statistics.median(rows[name][0]) if name in rows else None

    # Ratios within each repetition (the same disk state for both tools),
    # then their median: the machine's write-back varies between rounds.
    def paired(ours, theirs):
        r = [o / t for o, t in zip(ours, theirs)]
        return f"{statistics.median(r):.2f} (rounds: {', '.join(f'{x:.2f}' for x in r)})"

    if args.dvc:
        t = lambda name: rows[name][0]  # noqa: E731
        print()
        print(f"vitgraph push / dvc push: {paired(t('vitgraph push'), t('dvc push'))}")
        print(f"vitgraph pull / dvc pull: {paired(t('vitgraph pull'), t('dvc pull (objects and checkout)'))}")
        both = [a + b for a, b in zip(t("vitgraph pull"), t("vitgraph build after pull (restore into out/)"))]
        print(f"(vitgraph pull + build) / dvc pull: {paired(both, t('dvc pull (objects and checkout)'))}")
    shutil.rmtree(top)


if __name__ == "__main__":
    main()
