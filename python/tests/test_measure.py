"""The measurement helper on the CPU (standard library only)."""

import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from vitgraph.measure import measure_together, summarize, write_results  # noqa: E402


class MeasureTogether(unittest.TestCase):
    def test_every_member_runs_its_warmup_then_its_timed_batches_in_shuffled_blocks(self):
        calls = []
        members = {k: (lambda k=k: calls.append(k)) for k in ["a", "b", "c"]}
        doc = measure_together(members, warmup=3, batches=40, block=10, seed=7)
        self.assertEqual(calls[:9], ["a"] * 3 + ["b"] * 3 + ["c"] * 3)
        timed = calls[9:]
        self.assertEqual(len(timed), 120)
        blocks = [timed[i] for i in range(0, 120, 10)]
        for i in range(0, 120, 10):
            self.assertEqual(set(timed[i:i + 10]), {timed[i]})
        rounds = [blocks[i:i + 3] for i in range(0, 12, 3)]
        for r in rounds:
            self.assertEqual(sorted(r), ["a", "b", "c"])
        self.assertGreater(len({tuple(r) for r in rounds}), 1, "the order is shuffled")
        self.assertEqual(sorted(doc["members"]), ["a", "b", "c"])
        for m in doc["members"].values():
            self.assertEqual(len(m["samples"]["latency_ms"]), 40)
            self.assertEqual(m["batches"], 40)
        self.assertEqual(doc["method"]["timer"], "perf_counter")
        self.assertEqual(doc["method"]["rounds"], 4)
        # The same seed, the same order.
        again = []
        measure_together({k: (lambda k=k: again.append(k)) for k in ["a", "b", "c"]},
                         warmup=3, batches=40, block=10, seed=7)
        self.assertEqual(again, calls)

    def test_bad_arguments_are_refused(self):
        with self.assertRaises(ValueError):
            measure_together({})
        with self.assertRaises(ValueError):
            measure_together({"a": lambda: None}, batches=5, block=10)

    def test_a_summary_has_the_quantiles_and_the_throughput(self):
        s = summarize([4.0, 1.0, 3.0, 2.0, 5.0], images=8)
        self.assertEqual(s["latency_ms"]["median"], 3.0)
        self.assertEqual(s["latency_ms"]["min"], 1.0)
        self.assertAlmostEqual(s["latency_ms"]["p10"], 1.4)
        self.assertAlmostEqual(s["throughput_images_per_s"], 8 * 1000 / 3.0)
        self.assertEqual(s["images"], 40)
        self.assertNotIn("throughput_images_per_s", summarize([1.0]))

    def test_the_file_is_strict_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "results.json")
            write_results({"members": {"a": {"t": 1.5}}}, path)
            with open(path) as f:
                self.assertEqual(json.load(f), {"members": {"a": {"t": 1.5}}})
            with self.assertRaises(ValueError):
                write_results({"t": math.nan}, path)
            with open(path) as f:
                self.assertEqual(json.load(f), {"members": {"a": {"t": 1.5}}}, "the old file stays")


if __name__ == "__main__":
    unittest.main()
