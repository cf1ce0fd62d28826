#!/usr/bin/env python3
"""vitgraph against Snakemake on the same SLURM, the same study, in one run.

The study: 200 nodes — 100 CPU nodes and 100 nodes asking one GPU, each GPU
node reading its CPU node's output — with trivial commands. Both tools drive
the local SLURM that `scripts/slurm-setup.sh` starts (run it with
SLURM_CPUS=16 first). Every call either tool makes to `sbatch`, `squeue`,
`sacct`, `scontrol`, `scancel` and `srun` goes through a logging shim put in
front of the real commands on PATH, so the calls are counted exactly.

Measured, per tool:
  wall        a cold build of the study, seconds
  per node    wall / nodes (the commands themselves take milliseconds)
  calls       every SLURM command it ran, by name
  squeue/poll vitgraph: squeue calls per look at the cluster (its polls are
              its squeue calls, so: the largest number of squeue calls that
              began within one 150 ms window)
  re-runs     after `kill -9` of the driver mid-build and a second build:
              commands that ran twice (vitgraph; Snakemake with
              --rerun-incomplete, as its users run it)

Usage: scripts/bench_slurm.py --vitgraph target/release/vitgraph \\
           [--snakemake /path/to/venv/bin/snakemake] [--n 100] [--kill-after 6]
Snakemake 9 and snakemake-executor-plugin-slurm come from PyPI:
  python3 -m venv /tmp/smk && /tmp/smk/bin/pip install 'snakemake>=9,<10' snakemake-executor-plugin-slurm
Prints a markdown table.
"""

import argparse
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOOLS = ["sbatch", "squeue", "sacct", "scontrol", "scancel", "srun", "sinfo"]


def shims(root):
    """A folder of logging wrappers for the SLURM commands."""
    d = os.path.join(root, "shim")
    os.makedirs(d)
    for t in TOOLS:
        real = shutil.which(t)
        if real is None:
            continue
        with open(os.path.join(d, t), "w") as f:
            f.write(f"""#!/bin/sh
printf '%s %s\\n' "$(date +%s.%N)" "{t}" >> "$BENCH_SLURM_LOG"
exec {real} "$@"
""")
        os.chmod(os.path.join(d, t), 0o755)
    return d


def calls(log):
    out = collections.Counter()
    times = collections.defaultdict(list)
    if os.path.exists(log):
        for line in open(log):
            ts, tool = line.split()
            out[tool] += 1
            times[tool].append(float(ts))
    return out, times


def max_in_window(ts, window=0.15):
    ts = sorted(ts)
    best, j = 0, 0
    for i in range(len(ts)):
        while ts[i] - ts[j] > window:
            j += 1
        best = max(best, i - j + 1)
    return best


def vitgraph_ws(root, n):
    os.makedirs(os.path.join(root, "pipelines"))
    values = ", ".join(str(i) for i in range(n))
    with open(os.path.join(root, "pipelines", "study.ron"), "w") as f:
        f.write(f"""Pipeline(stages: {{
    "cpu": Stage(matrix: {{"i": [{values}]}},
        task: Command(run: "echo cpu-${{i}} >> side.log; echo ${{i}} > ${{out}}/v.txt", outputs: ["v.txt"])),
    "gpu": Stage(for_each: "cpu",
        task: Command(run: "echo gpu-${{i}} >> side.log; cat ${{needs.cpu}}/v.txt > ${{out}}/w.txt", outputs: ["w.txt"], resources: (gpus: 1))),
}})
""")
    with open(os.path.join(root, "vitgraph.ron"), "w") as f:
        f.write('Workspace(slurm: Slurm(mem: "1G"))\n')


def snakemake_ws(root, n):
    os.makedirs(root)
    with open(os.path.join(root, "Snakefile"), "w") as f:
        f.write(f"""N = range({n})

rule all:
    input: expand("out/gpu/{{i}}.txt", i=N)

rule cpu:
    output: "out/cpu/{{i}}.txt"
    resources: mem_mb=1000
    shell: "echo cpu-{{wildcards.i}} >> side.log; echo {{wildcards.i}} > {{output}}"

rule gpu:
    input: "out/cpu/{{i}}.txt"
    output: "out/gpu/{{i}}.txt"
    resources: mem_mb=1000, gres="gpu:1"
    shell: "echo gpu-{{wildcards.i}} >> side.log; cat {{input}} > {{output}}"
""")


def done_outputs(root):
    """Final outputs written: vitgraph's out/gpu/*/w.txt, Snakemake's out/gpu/*.txt."""
    n = 0
    for d, _, files in os.walk(os.path.join(root, "out", "gpu")):
        n += sum(f.endswith(".txt") for f in files)
    return n


def ran_twice(root):
    p = os.path.join(root, "side.log")
    if not os.path.exists(p):
        return 0
    lines = open(p).read().split()
    return len(lines) - len(set(lines))


def run_tool(cmd, cwd, env, kill_after=None, give_up=None):
    """Runs one build; kill -9 after `kill_after` s; `give_up` s: stop waiting (rc None)."""
    t = time.perf_counter()
    err_path = os.path.join(cwd, "..", os.path.basename(cwd) + f".stderr.{int(t * 1000)}")
    with open(err_path, "wb") as err:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        limit = kill_after if kill_after is not None else give_up
        try:
            p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            p.wait()
            if kill_after is None:
                return time.perf_counter() - t, None, open(err_path).read()[-3000:]
    return time.perf_counter() - t, p.returncode, open(err_path, errors="replace").read()[-3000:]


def cancel_all():
    subprocess.run(["scancel", "--me"], capture_output=True)


def wait_queue_empty(env):
    for _ in range(600):
        out = subprocess.run(["squeue", "-h", "-t", "pending,running,configuring,completing", "--me"],
                             capture_output=True, text=True).stdout
        if not out.strip():
            return
        time.sleep(0.5)


def measure(name, make, cmd, n, env_base, base, kill_after, give_up, again_extra=(), before_again=None):
    rows = {}
    # Cold build.
    root = os.path.join(base, name)
    make(root, n)
    log = os.path.join(base, f"{name}.calls")
    env = dict(env_base, BENCH_SLURM_LOG=log)
    wall, rc, err = run_tool(cmd, root, env, give_up=give_up)
    counts, times = calls(log)
    nodes = 2 * n
    rows["calls"] = counts
    rows["squeue_per_poll"] = max_in_window(times.get("squeue", []))
    rows["ran_twice_cold"] = ran_twice(root)
    if rc is None or kill_after is None:
        rows["after_kill"] = "—"
    if rc is None:
        print(f"{name}: no result after {give_up:.0f} s; stderr ends:\n{err[-1500:]}", file=sys.stderr)
        rows["wall"] = None
        rows["done"] = done_outputs(root)
        cancel_all()
        wait_queue_empty(env_base)
        return rows
    if rc != 0:
        print(f"{name} failed ({rc}); stderr ends:\n{err[-1500:]}", file=sys.stderr)
        rows["wall"] = None
        rows["done"] = done_outputs(root)
        rows["after_kill"] = "—"
        rows["failed"] = rc
        wait_queue_empty(env_base)
        return rows
    rows["wall"] = wall
    rows["per_node"] = wall / nodes
    wait_queue_empty(env_base)
    if kill_after is None:
        return rows
    # Kill -9 mid-build, then build again.
    root = os.path.join(base, f"{name}-kill")
    make(root, n)
    env = dict(env_base, BENCH_SLURM_LOG=os.path.join(base, f"{name}-kill.calls"))
    run_tool(cmd, root, env, kill_after=kill_after)
    if before_again is not None:
        subprocess.run(before_again, cwd=root, env=env, capture_output=True)
    wall2, rc, err = run_tool(list(cmd) + list(again_extra), root, env, give_up=give_up)
    if rc != 0:
        rows["after_kill"] = f"second build failed ({rc})"
    else:
        rows["after_kill"] = ran_twice(root)
    wait_queue_empty(env_base)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vitgraph", required=True)
    ap.add_argument("--snakemake", default=shutil.which("snakemake"))
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--kill-after", type=float, default=6.0)
    ap.add_argument("--give-up", type=float, default=600.0,
                    help="seconds after which a build that has not ended counts as hung")
    ap.add_argument("--snakemake-defaults", action="store_true",
                    help="also run Snakemake with the plugin's default status command")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="bench-slurm-", dir=os.path.join(os.path.dirname(__file__), "..", "target"))
    shim = shims(base)
    env = dict(os.environ, PATH=shim + os.pathsep + os.environ["PATH"])
    results = {}
    vg = os.path.abspath(args.vitgraph)
    results["vitgraph"] = measure("vitgraph", vitgraph_ws, [vg, "build", "--executor", "slurm"], args.n, env, base,
                                  args.kill_after, args.give_up)
    if args.snakemake:
        # Snakemake as its users run it: one job per rule instance, the plugin's polling, --rerun-incomplete
        # after `--unlock` when the driver was killed. No slurmdbd here, so its default status command (sacct)
        # never answers: `--slurm-status-command squeue` is what makes it work at all.
        smk = [args.snakemake, "--executor", "slurm", "--jobs", str(2 * args.n), "--latency-wait", "5",
               "--default-resources", "slurm_partition=debug", "--slurm-no-account"]
        kill = dict(again_extra=["--rerun-incomplete"], before_again=smk + ["--unlock"])
        results["snakemake"] = measure("snakemake", snakemake_ws, smk + ["--slurm-status-command", "squeue"],
                                       args.n, env, base, args.kill_after, args.give_up, **kill)
        # Tuned: job arrays and the first status check after 2 s instead of 40 s.
        tuned = smk + ["--slurm-status-command", "squeue", "--slurm-array-jobs", "all",
                       "--slurm-init-seconds-before-status-checks", "2"]
        kill = dict(again_extra=["--rerun-incomplete"], before_again=tuned + ["--unlock"])
        results["snakemake, arrays, 2 s"] = measure("snakemake-tuned", snakemake_ws, tuned, args.n, env, base,
                                                    args.kill_after, args.give_up, **kill)
        if args.snakemake_defaults:
            results["snakemake, defaults"] = measure("snakemake-defaults", snakemake_ws, smk, args.n, env, base,
                                                     None, args.give_up)
    print(f"study: {2 * args.n} nodes ({args.n} CPU, {args.n} asking one GPU), one SLURM, one run\n")
    print("| | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    def row(label, f):
        print(f"| {label} | " + " | ".join(f(r) for r in results.values()) + " |")
    row("wall time, cold build", lambda r: f"{r['wall']:.1f} s" if r["wall"] is not None
        else f"failed, exit {r['failed']} ({r['done']} of {args.n} final outputs)" if "failed" in r
        else f"no result after {args.give_up:.0f} s ({r['done']} of {args.n} final outputs)")
    row("per node", lambda r: f"{r['per_node'] * 1000:.0f} ms" if r["wall"] is not None else "—")
    for t in TOOLS:
        row(f"`{t}` calls", lambda r, t=t: str(r["calls"].get(t, 0)))
    row("most `squeue` calls within 150 ms", lambda r: str(r["squeue_per_poll"]))
    row("commands run twice, cold", lambda r: str(r["ran_twice_cold"]))
    row(f"commands run twice after kill -9 at {args.kill_after:.0f} s", lambda r: str(r["after_kill"]))
    for k, r in results.items():
        if k != "vitgraph" and r["wall"]:
            print(f"\nvitgraph / {k} wall time: {results['vitgraph']['wall'] / r['wall']:.2f}")


if __name__ == "__main__":
    main()
