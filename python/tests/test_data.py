"""vitgraph.table against a real workspace built by the real CLI
($VITGRAPH, which scripts/test.sh sets to the binary it built)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import vitgraph  # noqa: E402
from vitgraph.data import VitgraphError  # noqa: E402

PIPELINE = """Pipeline(stages: {
  "bench": Stage(matrix: {"model": ["a", "b"], "batch": [1, 8]},
                 task: Command(run: "python3 bench.py ${model} ${batch} ${out}/results.json",
                               inputs: ["bench.py"], outputs: ["results.json"], measure: true)),
  "rep": Stage(needs: ["bench"],
               task: Report(title: "t", sources: ["bench"], columns: ["latency_ms.median", "note"])),
})
"""

BENCH = """import json, sys
model, batch, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
json.dump({"latency_ms": {"median": {"a": 2.0, "b": 3.5}[model] * batch}, "note": "ok"}, open(out, "w"))
"""


TOGETHER = """Pipeline(stages: {
  "pair": Stage(matrix: {"model": ["a", "b"]}, together: ["model"], check: true, repeat: 2,
                task: Command(run: "python3 pair.py ${model} ${rep} ${out}/results.json",
                              inputs: ["pair.py"], outputs: ["results.json"], measure: true)),
})
"""

PAIR = """import json, sys
models, rep, out = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3]
level = {"a": 2.0, "a#2": 2.0, "b": 3.0}
json.dump({"members": {m: {"latency_ms": {"median": level[m] * rep}} for m in models}}, open(out, "w"))
"""


def vitgraph_exe():
    exe = os.environ.get("VITGRAPH") or shutil.which("vitgraph")
    if not exe:
        raise AssertionError("set VITGRAPH to a vitgraph binary (scripts/test.sh does)")
    return exe


class TableTest(unittest.TestCase):
    def setUp(self):
        self.ws = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.ws, "pipelines"))
        with open(os.path.join(self.ws, "pipelines", "p.ron"), "w") as f:
            f.write(PIPELINE)
        with open(os.path.join(self.ws, "bench.py"), "w") as f:
            f.write(BENCH)
        self.exe = vitgraph_exe()
        os.environ["VITGRAPH"] = self.exe
        build = subprocess.run([self.exe, "-C", self.ws, "build", "-j", "1"], capture_output=True, text=True)
        self.assertEqual(build.returncode, 0, build.stderr)

    def tearDown(self):
        shutil.rmtree(self.ws, ignore_errors=True)

    def test_a_report_table_keeps_its_types(self):
        rows = vitgraph.table("rep", backend="records", workspace=os.path.join(self.ws, "pipelines"))
        self.assertEqual(len(rows), 4)
        by = {(r["model"], r["batch"]): r for r in rows}
        self.assertEqual(by[("b", 8)]["latency_ms.median"], 28.0)
        self.assertIsInstance(by[("a", 1)]["batch"], int)
        self.assertIsInstance(by[("a", 1)]["latency_ms.median"], float)
        self.assertEqual(by[("a", 1)]["note"], "ok")
        try:
            import pandas  # noqa: F401
        except ImportError:
            with self.assertRaisesRegex(VitgraphError, "pip install pandas"):
                vitgraph.table("rep", workspace=self.ws)
        else:
            df = vitgraph.table("rep", workspace=self.ws)
            self.assertEqual(str(df["batch"].dtype), "int64")
            self.assertEqual(sorted(df["latency_ms.median"]), [2.0, 3.5, 16.0, 28.0])

    def test_parquet_and_csv_give_the_same_table(self):
        if not vitgraph.data._has("pyarrow"):
            if os.environ.get("VITGRAPH_REQUIRE_DATAFRAMES") == "1":
                self.fail("VITGRAPH_REQUIRE_DATAFRAMES=1 but pyarrow is not installed")
            with self.assertRaisesRegex(VitgraphError, "pip install pyarrow"):
                vitgraph.table("rep", backend="records", workspace=self.ws, source="parquet")
            return
        from_csv = vitgraph.table("rep", backend="records", workspace=self.ws, source="csv")
        from_parquet = vitgraph.table("rep", backend="records", workspace=self.ws, source="parquet")
        self.assertEqual(from_csv, from_parquet)
        self.assertEqual([type(v) for v in from_csv[0].values()],
                         [type(v) for v in from_parquet[0].values()])
        # The default reads the Parquet file when pyarrow is there.
        self.assertEqual(vitgraph.table("rep", backend="records", workspace=self.ws), from_parquet)
        # DataFrames from either file are equal, dtypes included.
        if vitgraph.data._has("pandas"):
            import pandas.testing
            pandas.testing.assert_frame_equal(
                vitgraph.table("rep", workspace=self.ws, source="csv"),
                vitgraph.table("rep", workspace=self.ws, source="parquet"))
        if vitgraph.data._has("polars"):
            a = vitgraph.table("rep", backend="polars", workspace=self.ws, source="csv")
            b = vitgraph.table("rep", backend="polars", workspace=self.ws, source="parquet")
            self.assertTrue(a.equals(b), f"{a}\n{b}")
            self.assertEqual(a.schema, b.schema)
        # A damaged Parquet file makes the report stale (vitgraph checks its
        # outputs); its last rows asked for anyway, the error names the file
        # and the way around.
        with open(os.path.join(self.ws, "out", "rep", "table.parquet"), "wb") as f:
            f.write(b"PAR1 not parquet")
        with self.assertRaisesRegex(VitgraphError, "output_modified: out/rep/table.parquet"):
            vitgraph.table("rep", backend="records", workspace=self.ws)
        with self.assertRaisesRegex(VitgraphError, r"table\.parquet cannot be read as Parquet.*source=\"csv\""):
            vitgraph.table("rep", backend="records", workspace=self.ws, stale_ok=True)

    def test_dataframes_from_pandas_and_polars(self):
        # `1`: every backend is there; `pandas`: pandas without pyarrow.
        mode = os.environ.get("VITGRAPH_REQUIRE_DATAFRAMES", "")
        required = {"1": ("pandas", "polars"), "pandas": ("pandas",)}.get(mode, ())
        if mode == "pandas":
            self.assertFalse(vitgraph.data._has("pyarrow"), "this run is meant to be without pyarrow")
        for backend in ("pandas", "polars"):
            if not vitgraph.data._has(backend):
                if backend in required:
                    self.fail(f"VITGRAPH_REQUIRE_DATAFRAMES={mode} but {backend} is not installed")
                continue
            df = vitgraph.table("rep", backend=backend, workspace=self.ws)
            self.assertEqual(list(df.columns)[:2], ["model", "batch"])
            self.assertEqual(str(df["batch"].dtype).lower(), "int64")
            self.assertEqual(sorted(df["latency_ms.median"].to_list()), [2.0, 3.5, 16.0, 28.0])
            runs = vitgraph.runs("bench", backend=backend, workspace=self.ws)
            self.assertEqual(len(runs), 4)
            self.assertEqual(sorted(runs["latency_ms.median"].to_list()), [2.0, 3.5, 16.0, 28.0])

    def test_a_stale_report_says_so_unless_stale_rows_are_accepted(self):
        with open(os.path.join(self.ws, "bench.py"), "a") as f:
            f.write("# changed\n")
        with self.assertRaises(VitgraphError) as e:
            vitgraph.table("rep", backend="records", workspace=self.ws)
        message = str(e.exception)
        self.assertIn("report `rep`", message)
        self.assertIn("is stale", message)
        self.assertIn("`vitgraph build rep`", message)
        self.assertIn("stale_ok=True", message)
        rows = vitgraph.table("rep", backend="records", stale_ok=True, workspace=self.ws)
        self.assertEqual(len(rows), 4)

    def test_runs_are_one_row_per_run_with_typed_params_states_and_metrics(self):
        rows = vitgraph.runs("bench", backend="records", workspace=self.ws)
        self.assertEqual(len(rows), 4)
        row = next(r for r in rows if r["id"] == "bench[model=b,batch=8]")
        self.assertEqual((row["model"], row["batch"]), ("b", 8))
        self.assertEqual(row["state"], "fresh")
        self.assertEqual(row["latency_ms.median"], 28.0)
        self.assertNotIn("note", row)  # text outside `env` is no metric
        # The run's content key, start and duration, as the store records them.
        self.assertRegex(row["key"], r"^[0-9a-f]{64}$")
        self.assertEqual(len({r["key"] for r in rows}), 4)
        self.assertGreater(row["duration_s"], 0)
        self.assertRegex(row["started_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$")
        with open(os.path.join(self.ws, "bench.py"), "a") as f:
            f.write("# changed\n")
        rows = vitgraph.runs("bench", backend="records", workspace=self.ws)
        self.assertTrue(all(r["state"] == "stale" and "input_changed" in r["reasons"] for r in rows), rows)

    def test_runs_imported_from_another_host_say_where_they_were_measured(self):
        gpu = tempfile.mkdtemp()
        laptop = tempfile.mkdtemp()
        try:
            for ws in (gpu, laptop):
                shutil.copytree(os.path.join(self.ws, "pipelines"), os.path.join(ws, "pipelines"))
                shutil.copy(os.path.join(self.ws, "bench.py"), ws)
            gpu_env = dict(os.environ, VITGRAPH_FAKE_ENV='{"cpu":"Xeon 8480+","host":"gpu-box"}')
            bundle = os.path.join(gpu, "study.vgb")
            for args in (["build", "-j", "1"], ["export", "-o", bundle]):
                r = subprocess.run([self.exe, "-C", gpu, *args], capture_output=True, text=True, env=gpu_env)
                self.assertEqual(r.returncode, 0, r.stderr)
            for args in (["import", bundle], ["build"]):
                r = subprocess.run([self.exe, "-C", laptop, *args], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
            rows = vitgraph.runs("bench", backend="records", workspace=laptop)
            self.assertEqual(len(rows), 4)
            self.assertTrue(all(r["measured_elsewhere"] == "gpu-box" and r["state"] == "fresh" for r in rows), rows)
            self.assertTrue(all(r["signed_by"] is None for r in rows), rows)
            here = vitgraph.runs("bench", backend="records", workspace=self.ws)
            self.assertTrue(all(r["measured_elsewhere"] is None for r in here), here)
        finally:
            shutil.rmtree(gpu, ignore_errors=True)
            shutil.rmtree(laptop, ignore_errors=True)

    def test_a_block_measured_together_is_one_row_per_member(self):
        with open(os.path.join(self.ws, "pipelines", "t.ron"), "w") as f:
            f.write(TOGETHER)
        with open(os.path.join(self.ws, "pair.py"), "w") as f:
            f.write(PAIR)
        build = subprocess.run([self.exe, "-C", self.ws, "build", "pair", "-j", "1"],
                               capture_output=True, text=True)
        self.assertEqual(build.returncode, 0, build.stderr)
        rows = vitgraph.runs("pair", backend="records", workspace=self.ws)
        got = sorted((r["id"], r["model"], r["member"], r["latency_ms.median"]) for r in rows)
        self.assertEqual(got, [
            ("pair[rep=1]", "a", "a", 2.0), ("pair[rep=1]", "a#2", "a#2", 2.0),
            ("pair[rep=1]", "b", "b", 3.0),
            ("pair[rep=2]", "a", "a", 4.0), ("pair[rep=2]", "a#2", "a#2", 4.0),
            ("pair[rep=2]", "b", "b", 6.0),
        ])

    def test_compare_gives_the_rows_of_vitgraph_compare(self):
        subprocess.run([self.exe, "-C", self.ws, "baseline", "save", "first"], check=True,
                       capture_output=True)
        with open(os.path.join(self.ws, "bench.py"), "a") as f:
            f.write("# changed\n")
        subprocess.run([self.exe, "-C", self.ws, "build", "bench", "-j", "1"], check=True,
                       capture_output=True)
        rows = vitgraph.compare("baseline:first", "HEAD", ["bench"], metrics=["latency_ms.median"],
                                backend="records", workspace=self.ws)
        self.assertEqual(len(rows), 4)
        row = next(r for r in rows if r["config"] == "bench[model=b,batch=8]")
        self.assertEqual((row["a_value"], row["b_value"], row["ratio"]), (28.0, 28.0, 1.0))
        self.assertEqual(row["metric"], "latency_ms.median")
        self.assertIn("input bench.py", row["differs"])
        with self.assertRaisesRegex(VitgraphError, "baseline"):
            vitgraph.compare("baseline:nope", "HEAD", backend="records", workspace=self.ws)

    def test_a_study_built_with_overrides_is_read_with_them(self):
        # Built again with one batch only: without the override the report
        # reads as stale, with it as fresh, and its table has that batch.
        build = subprocess.run([self.exe, "-C", self.ws, "build", "-p", "batch=[8]"],
                               capture_output=True, text=True)
        self.assertEqual(build.returncode, 0, build.stderr)
        with self.assertRaisesRegex(VitgraphError, r"pass them as params=\{\.\.\.\}"):
            vitgraph.table("rep", backend="records", workspace=self.ws)
        rows = vitgraph.table("rep", backend="records", workspace=self.ws, params={"batch": [8]})
        self.assertEqual(sorted(r["batch"] for r in rows), [8, 8])
        runs = vitgraph.runs("bench", backend="records", workspace=self.ws, params={"batch": [8]})
        self.assertEqual({r["state"] for r in runs}, {"fresh"})
        self.assertEqual(vitgraph.data._overrides({"batch": [1, 4], "model": "a", "f": 0.5}),
                         ["-p", "batch=[1, 4]", "-p", "model=a", "-p", "f=0.5"])

    def test_errors_name_the_workspace_the_stage_and_the_fix(self):
        with self.assertRaisesRegex(VitgraphError, "unknown target `nope`"):
            vitgraph.table("nope", backend="records", workspace=self.ws)
        outside = tempfile.mkdtemp()
        try:
            with self.assertRaisesRegex(VitgraphError, "in no vitgraph workspace"):
                vitgraph.table("rep", backend="records", workspace=outside)
        finally:
            shutil.rmtree(outside)
        with self.assertRaisesRegex(VitgraphError, "backend 'csv'"):
            vitgraph.table("rep", backend="csv", workspace=self.ws)


if __name__ == "__main__":
    unittest.main()
