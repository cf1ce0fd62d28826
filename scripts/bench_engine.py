#!/usr/bin/env python3
"""Engine benchmark: vitgraph against make and ninja on the same DAG.

The DAG has the shape of a real sweep: N experiments -> N conversions
(for_each) -> N analyses (for_each) -> 1 report (needs), with trivial
commands. For each tool it measures, in the same run:

  cold       a full build from nothing, -j1; per-node overhead is
             (cold - commands alone) / nodes, where "commands alone" runs
             every command through `sh -c` in sequence with no build tool
  no-op      a build with everything up to date (median of --repeat runs)
  status     `vitgraph status` (make -q / ninja -n as the closest peers)
  status after a change
             `vitgraph status` (ninja -n) with one experiment's input file
             changed and not yet rebuilt, and its peak RSS
  one-input  the rebuild after one experiment's input file changed
             (four commands re-run)
  peak RSS   of the cold build (the same run as its time) and of a no-op
             build (/usr/bin/time -v)

Usage: scripts/bench_engine.py [--n 3333] [--repeat 7] [--vitgraph target/release/vitgraph]
                               [--tools vitgraph,ninja,make]
Prints a markdown table.

Two builds of vitgraph in one run (sharing the "commands alone" baseline,
measured in the order given): --vitgraph before=OLD --vitgraph after=NEW;
each becomes a row `vitgraph before`, `vitgraph after`.
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
    r = subprocess.run(cmd, cwd=cwd, shell=isinstance(cmd, str), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {cmd}\n{r.stderr.decode()[-2000:]}")
    return dt


def peak_rss_mb(cmd, cwd, env=None):
    return timed_rss(cmd, cwd, env)[1]


def timed_rss(cmd, cwd, env=None):
    """Runs `cmd` under /usr/bin/time -v: (wall seconds, peak RSS in MB)."""
    t = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"command failed ({r.returncode}): {cmd}\n{r.stderr.decode()[-2000:]}")
    for line in r.stderr.decode().splitlines():
        if "Maximum resident set size" in line:
            return dt, int(line.split(":")[1]) / 1024
    return dt, float("nan")


def median(f, repeat):
    return statistics.median(f() for _ in range(repeat))


def write_inputs(root, n):
    os.makedirs(os.path.join(root, "inputs"), exist_ok=True)
    for i in range(n):
        with open(os.path.join(root, "inputs", f"{i}.txt"), "w") as f:
            f.write(f"{i}\n")


# The four commands, written once for every tool. $IN/$OUT/$UP are filled per tool.
EXP = "cat {inp} > {out}/run.txt"
CONV = "cat {up}/run.txt > {out}/trace.txt"
ANA = "cat {up}/trace.txt > {out}/metrics.txt"
REPORT = "ls out/ana | wc -l > {out}/report.txt"


def vitgraph_ws(root, n):
    os.makedirs(os.path.join(root, "pipelines"))
    write_inputs(root, n)
    values = ", ".join(str(i) for i in range(n))
    ron = f"""Pipeline(stages: {{
    "exp": Stage(matrix: {{"i": [{values}]}},
        task: Command(run: "{EXP.format(inp='inputs/${i}.txt', out='${out}')}", inputs: ["inputs/${{i}}.txt"], outputs: ["run.txt"])),
    "conv": Stage(for_each: "exp", task: Command(run: "{CONV.format(up='${needs.exp}', out='${out}')}", outputs: ["trace.txt"])),
    "ana": Stage(for_each: "conv", task: Command(run: "{ANA.format(up='${needs.conv}', out='${out}')}", outputs: ["metrics.txt"])),
    "report": Stage(needs: ["ana"], task: Command(run: "{REPORT.format(out='${out}')}", outputs: ["report.txt"])),
}})
"""
    # `${i}` inside the f-string above must reach RON as `${i}`.
    ron = ron.replace("inputs/${i}.txt", "inputs/${i}.txt")
    with open(os.path.join(root, "pipelines", "sweep.ron"), "w") as f:
        f.write(ron)


def make_ws(root, n):
    write_inputs(root, n)
    lines = [".PHONY: all", "all: out/report/report.txt", ""]
    for i in range(n):
        e, c, a = f"out/exp/{i}", f"out/conv/{i}", f"out/ana/{i}"
        lines += [f"{e}/run.txt: inputs/{i}.txt", f"\t@mkdir -p {e} && " + EXP.format(inp=f"inputs/{i}.txt", out=e), ""]
        lines += [f"{c}/trace.txt: {e}/run.txt", f"\t@mkdir -p {c} && " + CONV.format(up=e, out=c), ""]
        lines += [f"{a}/metrics.txt: {c}/trace.txt", f"\t@mkdir -p {a} && " + ANA.format(up=c, out=a), ""]
    deps = " ".join(f"out/ana/{i}/metrics.txt" for i in range(n))
    lines += [f"out/report/report.txt: {deps}", "\t@mkdir -p out/report && " + REPORT.format(out="out/report"), ""]
    with open(os.path.join(root, "Makefile"), "w") as f:
        f.write("\n".join(lines))


def ninja_ws(root, n):
    write_inputs(root, n)
    lines = ["rule run", "  command = mkdir -p $dir && $cmd", ""]
    for i in range(n):
        e, c, a = f"out/exp/{i}", f"out/conv/{i}", f"out/ana/{i}"
        lines += [f"build {e}/run.txt: run inputs/{i}.txt", f"  dir = {e}", "  cmd = " + EXP.format(inp=f"inputs/{i}.txt", out=e)]
        lines += [f"build {c}/trace.txt: run {e}/run.txt", f"  dir = {c}", "  cmd = " + CONV.format(up=e, out=c)]
        lines += [f"build {a}/metrics.txt: run {c}/trace.txt", f"  dir = {a}", "  cmd = " + ANA.format(up=c, out=a)]
    deps = " ".join(f"out/ana/{i}/metrics.txt" for i in range(n))
    lines += [f"build out/report/report.txt: run {deps}", "  dir = out/report", "  cmd = " + REPORT.format(out="out/report")]
    with open(os.path.join(root, "build.ninja"), "w") as f:
        f.write("\n".join(lines) + "\n")


def commands_alone(root, n):
    """Every command through `sh -c`, in sequence: the commands' own time."""
    script = os.path.join(root, "all.sh")
    with open(script, "w") as f:
        for i in range(n):
            e, c, a = f"o/exp/{i}", f"o/conv/{i}", f"o/ana/{i}"
            f.write(f"mkdir -p {e} {c} {a}\n")
            f.write(f"sh -c '{EXP.format(inp=f'inputs/{i}.txt', out=e)}'\n")
            f.write(f"sh -c '{CONV.format(up=e, out=c)}'\n")
            f.write(f"sh -c '{ANA.format(up=c, out=a)}'\n")
        f.write("mkdir -p o/report; sh -c 'ls o/ana | wc -l > o/report/report.txt'\n")
    write_inputs(root, n)
    return sh(["sh", script], root)


def one_input_commands(root, n, repeat):
    """The four commands a one-input rebuild re-runs, alone (after
    `commands_alone` made their inputs): their own time, median of `repeat`."""
    i = n // 2
    script = os.path.join(root, "one.sh")
    with open(script, "w") as f:
        f.write(f"sh -c '{EXP.format(inp=f'inputs/{i}.txt', out=f'o/exp/{i}')}'\n")
        f.write(f"sh -c '{CONV.format(up=f'o/exp/{i}', out=f'o/conv/{i}')}'\n")
        f.write(f"sh -c '{ANA.format(up=f'o/conv/{i}', out=f'o/ana/{i}')}'\n")
        f.write("sh -c 'ls o/ana | wc -l > o/report/report.txt'\n")
    return median(lambda: sh(["sh", script], root), repeat)


def vitgraph_builds(given):
    """`--vitgraph` values as {row name: absolute path}: one unlabelled PATH
    is the row `vitgraph`, LABEL=PATH the row `vitgraph LABEL`."""
    default = os.path.join(os.path.dirname(__file__), "..", "target", "release", "vitgraph")
    builds = {}
    for value in given or [default]:
        label, sep, path = value.partition("=")
        if not sep:
            label, path = "", value
        name = f"vitgraph {label}" if label else "vitgraph"
        if name in builds:
            sys.exit(f"--vitgraph {value}: the row {name!r} is given twice; label each build (before=PATH)")
        builds[name] = os.path.abspath(path)
    return builds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3333)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--tools", default="vitgraph,ninja,make", help="comma-separated subset of vitgraph,ninja,make")
    ap.add_argument("--vitgraph", action="append", help="PATH, or LABEL=PATH (repeatable: one row per build)")
    args = ap.parse_args()
    builds = vitgraph_builds(args.vitgraph)
    n, nodes = args.n, 3 * args.n + 1
    base = tempfile.mkdtemp(prefix="vitgraph-bench-")
    env = dict(os.environ, VITGRAPH_NO_PROGRESS="1")
    rows = {}
    try:
        cmds_dir = os.path.join(base, "cmds")
        os.makedirs(cmds_dir)
        t_cmds = commands_alone(cmds_dir, n)
        t_one_cmds = one_input_commands(cmds_dir, n, args.repeat)

        tools = {
            name: (vitgraph_ws, [vg, "build", "-j", "1"], [vg, "status"]) for name, vg in builds.items()
        }
        tools.update({
            "ninja": (ninja_ws, ["ninja", "-j", "1"], ["ninja", "-n"]),
            "make": (make_ws, ["make", "-j", "1"], ["make", "-q"]),
        })
        wanted = args.tools.split(",")
        tools = {k: v for k, v in tools.items() if k.split(" ")[0] in wanted}
        for name, (setup, build, status) in tools.items():
            root = os.path.join(base, name)
            os.makedirs(root)
            setup(root, n)
            # The cold build once, timed and with its peak memory.
            cold, rss_cold = timed_rss(build, root, env)
            noop = median(lambda: sh(build, root, env), args.repeat)
            is_vitgraph = name.startswith("vitgraph")
            st_cmd = status if is_vitgraph else None
            stat = median(lambda: sh(st_cmd, root, env), args.repeat) if st_cmd else float("nan")

            def one_input():
                p = os.path.join(root, "inputs", f"{n // 2}.txt")
                with open(p, "a") as f:
                    f.write("x\n")
                return sh(build, root, env)

            one = median(one_input, args.repeat)
            # The one-input rebuild left a fresh workspace: settle, then a no-op.
            sh(build, root, env)
            changed, rss_changed = float("nan"), float("nan")
            if is_vitgraph or name == "ninja":
                peer = status if is_vitgraph else ["ninja", "-n"]
                with open(os.path.join(root, "inputs", f"{n // 3}.txt"), "a") as f:
                    f.write("changed\n")
                changed = median(lambda: sh(peer, root, env), args.repeat)
                rss_changed = peak_rss_mb(peer, root, env)
                sh(build, root, env)
            rss_noop = peak_rss_mb(build, root, env)
            rows[name] = dict(cold=cold, overhead_ms=(cold - t_cmds) / nodes * 1000, noop=noop, status=stat, one=one,
                              rss_noop=rss_noop, rss_cold=rss_cold, changed=changed, rss_changed=rss_changed)
            shutil.rmtree(root, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)

    # Four commands re-run in the one-input case: their own time, from the serial run.
    per_cmd_ms = t_cmds / nodes * 1000
    print(f"\nN = {n} experiments, {nodes} nodes; commands alone (sh -c, serial): {t_cmds:.2f} s ({per_cmd_ms:.2f} ms/command)")
    print(f"machine: {os.cpu_count()} cores; medians of {args.repeat} runs\n")
    print("| tool | cold build | overhead / node | no-op build | status | one-input rebuild | peak RSS cold | peak RSS no-op |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        st = f"{r['status'] * 1000:.0f} ms" if r["status"] == r["status"] else "—"
        print(
            f"| {name} | {r['cold']:.2f} s | {r['overhead_ms']:.2f} ms | {r['noop'] * 1000:.0f} ms | {st} | "
            f"{r['one'] * 1000:.0f} ms | {r['rss_cold']:.0f} MB | {r['rss_noop']:.0f} MB |"
        )
    print("\n| tool | status after one input changed | its peak RSS |")
    print("|---|---|---|")
    for name, r in rows.items():
        if r["changed"] == r["changed"]:
            print(f"| {name} | {r['changed'] * 1000:.0f} ms | {r['rss_changed']:.0f} MB |")
    first = next((k for k in rows if k.startswith("vitgraph")), None)
    if first is None or "ninja" not in rows:
        return
    v, nj = rows[first], rows["ninja"]
    print(f"\nvitgraph no-op / ninja no-op = {v['noop'] / nj['noop']:.2f}; status / ninja no-op = {v['status'] / nj['noop']:.2f}")
    print(f"one-input rebuild minus its four commands run alone ({t_one_cmds * 1000:.1f} ms): {(v['one'] - t_one_cmds) * 1000:.0f} ms"
          f" (ninja: {(nj['one'] - t_one_cmds) * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
