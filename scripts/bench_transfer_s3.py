#!/usr/bin/env python3
"""Pushing and pulling a study through an S3-compatible server: vitgraph
against the AWS CLI (`aws s3 sync`) carrying the same objects to and from
the same server, in one run.

The study is bench_transfer.py's (--configs measured configurations, each
writing --files small files). The server is moto's
(`scripts/s3-server.sh`, on 127.0.0.1): its speed, not S3's, bounds both
tools, so the figures compare the tools, not the service. Measured, each
--repeat times in alternation (a fresh bucket per tool and round), medians:

  vitgraph push / pull       to an empty bucket; from it into a fresh
                             workspace; each again with nothing new
  aws s3 sync                cache/objects/ to an empty bucket and back into
                             an empty folder; each again with nothing new

Needs a vitgraph built with `--features s3` and the `aws` command
(`pip install awscli`). Usage:
  scripts/bench_transfer_s3.py [--vitgraph target/release/vitgraph]
                               [--configs 1000] [--files 10] [--repeat 3]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_transfer import count_files, sh, size_of, study  # noqa: E402

KEYS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret",
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1"}


def workspace(path, pipeline, url, endpoint):
    os.makedirs(os.path.join(path, "pipelines"), exist_ok=True)
    with open(os.path.join(path, "pipelines", "s.ron"), "w") as f:
        f.write(pipeline)
    with open(os.path.join(path, "vitgraph.ron"), "w") as f:
        f.write(f'Workspace(remotes: {{"lab": Remote(url: "{url}", endpoint: "{endpoint}")}})')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vitgraph", default="target/release/vitgraph")
    ap.add_argument("--configs", type=int, default=1000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    vg = os.path.abspath(args.vitgraph)
    aws = shutil.which("aws")
    if not aws:
        sys.exit("the `aws` command is needed (pip install awscli)")
    here = os.path.dirname(os.path.abspath(__file__))
    started = subprocess.run([os.path.join(here, "s3-server.sh"), "start"], check=True,
                             capture_output=True, text=True).stdout
    env = dict(kv.split("=", 1) for kv in started.split()[1:])
    endpoint = env["VITGRAPH_S3_ENDPOINT"]
    os.environ.update(KEYS)
    boto_path = env.get("VITGRAPH_S3_PYTHONPATH", "")

    def make_bucket(name):
        subprocess.run([sys.executable, "-c",
                        "import boto3; boto3.client('s3', endpoint_url='%s').create_bucket(Bucket='%s')"
                        % (endpoint, name)], check=True, env={**os.environ, "PYTHONPATH": boto_path})

    top = tempfile.mkdtemp(prefix="vg-bench-s3-")
    times = {}
    try:
        pipeline = study(args.configs, args.files)
        src = os.path.join(top, "src")
        workspace(src, pipeline, "s3://unused", endpoint)
        t_build = sh([vg, "build"], src)
        objects = os.path.join(src, "cache", "objects")
        print(f"study: {args.configs} configurations, {count_files(objects)} objects, "
              f"{size_of(objects) / 1e6:.1f} MB in cache/objects (built in {t_build:.1f} s)",
              file=sys.stderr)

        def note(name, dt):
            times.setdefault(name, []).append(dt)
            print(f"  {name}: {dt:.2f} s", file=sys.stderr)

        for r in range(args.repeat):
            rd = os.path.join(top, f"round{r}")
            os.makedirs(rd)
            vb, ab = f"vg-{r}", f"aws-{r}"
            make_bucket(vb)
            make_bucket(ab)
            url = f"s3://{vb}/study"
            workspace(src, pipeline, url, endpoint)
            note("vitgraph push", sh([vg, "push"], src))
            note("vitgraph push, no change", sh([vg, "push"], src))
            lap = os.path.join(rd, "laptop")
            workspace(lap, pipeline, url, endpoint)
            note("vitgraph pull", sh([vg, "pull"], lap))
            note("vitgraph pull, no change", sh([vg, "pull"], lap))
            s3 = [aws, "s3", "sync", "--only-show-errors", "--endpoint-url", endpoint]
            note("aws s3 sync up", sh(s3 + [objects, f"s3://{ab}/objects"], src))
            note("aws s3 sync up, no change", sh(s3 + [objects, f"s3://{ab}/objects"], src))
            down = os.path.join(rd, "aws-down")
            os.makedirs(down)
            note("aws s3 sync down", sh(s3 + [f"s3://{ab}/objects", down], rd))
            note("aws s3 sync down, no change", sh(s3 + [f"s3://{ab}/objects", down], rd))
    finally:
        subprocess.run([os.path.join(here, "s3-server.sh"), "stop"],
                       env={**os.environ, "VITGRAPH_S3_PID": env.get("VITGRAPH_S3_PID", "")})
        shutil.rmtree(top, ignore_errors=True)

    print("| operation | median (s) | runs |")
    print("| --- | ---: | --- |")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.2f} | {', '.join(f'{t:.2f}' for t in ts)} |")
    for ours, theirs in [("vitgraph push", "aws s3 sync up"), ("vitgraph pull", "aws s3 sync down")]:
        ratios = [a / b for a, b in zip(times[ours], times[theirs])]
        print(f"{ours} / {theirs}, paired by round: median {statistics.median(ratios):.2f} "
              f"({', '.join(f'{x:.2f}' for x in ratios)})")


if __name__ == "__main__":
    main()
