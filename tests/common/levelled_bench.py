import json, os, random, statistics, sys
impl, rep, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
level = json.load(open("levels.json"))[impl]
rng = random.Random(f"{impl}-{rep}-{os.environ.get('BENCH_SALT', '')}")
shift = level * (1 + 0.01 * rng.gauss(0, 1))
samples = [shift * (1 + 0.02 * rng.gauss(0, 1)) for _ in range(50)]
with open(out, "w") as f:
    json.dump({"latency_ms": {"median": statistics.median(samples)}, "samples": {"latency_ms": samples}}, f)
