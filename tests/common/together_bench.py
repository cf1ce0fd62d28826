import json, math, os, random, statistics, sys
mode, impls, rep, out = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]
level = {"a": 2.0, "b": 3.7, "c": 5.0, "g": 0.5, "u": 1.0}
proc = random.Random(f"{mode}-{rep}-{sys.argv[2]}")
factor = math.exp(0.1 * proc.gauss(0, 1))
samples = {i: [] for i in impls}
for _ in range(10):
    order = list(impls)
    proc.shuffle(order)
    for i in order:
        f = 1.0 if i == "g" else factor
        # `a#2` is a second instance of `a` (the A/A check); AA_DRIFT_REP
        # makes that repetition's process drift while it measures it.
        name, twin = i.split("#")[0], "#" in i
        drift = 1.05 if twin and os.environ.get("AA_DRIFT_REP") == str(rep) else 1.0
        samples[i] += [level[name] * f * drift * (1 + 0.01 * proc.gauss(0, 1)) for _ in range(20)]
def one(i):
    if i == "u":  # an implementation the device cannot run: no number
        return {"status": "unsupported"}
    return {"latency_ms": {"median": statistics.median(samples[i])}, "samples": {"latency_ms": samples[i]}}
doc = {"members": {i: one(i) for i in impls}} if mode == "together" else one(impls[0])
with open(out, "w") as f:
    json.dump(doc, f)
