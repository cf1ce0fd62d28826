//! The SLURM executor against a scripted cluster ([`super::fake`]), on a
//! paused clock: submission (arrays, chunking, settings, rate limit,
//! retries), the watch (results, failed queries, the settle window, `sacct`
//! classification), adoption after a driver ended, `--detach` and
//! interrupts — each in milliseconds, asserting exactly which commands ran.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::time::{Duration, Instant};

use super::cmd::SlurmCtl;
use super::executor::{Config, JobRecord, SlurmExecutor};
use super::fake::{FakeSlurm, Fate};
use crate::config::Slurm;
use crate::engine::executor::{Executor, Finished};
use crate::engine::failure::{FailureKind, NodeFailure};
use crate::engine::run::Job;
use crate::hash::ContentHash;
use crate::store::Store;
use crate::tasks::command::CommandSpec;
use crate::tasks::{Resources, TaskSpec};

/// A workspace, its store, the fake cluster and an executor over them.
struct Bench {
    _dir: tempfile::TempDir,
    store: Arc<Store>,
    fake: Arc<FakeSlurm>,
    exec: SlurmExecutor,
}

fn bench_with(stages: &[(&str, Slurm)], detach: bool, fake: FakeSlurm) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let fake = Arc::new(fake);
    let ctl: Arc<dyn SlurmCtl> = fake.clone();
    let exec = SlurmExecutor::new(Config {
        store: store.clone(),
        exe: PathBuf::from("/opt/vitgraph"),
        stages: stages
            .iter()
            .map(|(name, s)| (name.to_string(), s.clone()))
            .collect(),
        detach,
        name: "vg-test".into(),
        ctl,
    });
    Bench {
        _dir: dir,
        store,
        fake,
        exec,
    }
}

fn bench() -> Bench {
    bench_with(&[], false, FakeSlurm::new())
}

impl Bench {
    /// A node's job as the engine hands it over: an attempt begun, its
    /// directory under `cache/jobs/`.
    fn job(&self, node: &str, stage: &str, gpus: u32) -> Job {
        let key = ContentHash::of_bytes(node.as_bytes());
        let attempt = self.store.journal().begin_attempt(node, &key).unwrap();
        let dir = self.store.journal().job_dir(attempt);
        std::fs::create_dir_all(&dir).unwrap();
        Job {
            node: node.into(),
            stage: stage.into(),
            attempt: attempt.0,
            adopt: None,
            task: TaskSpec::Command(CommandSpec {
                run: "true".into(),
                inputs: Vec::new(),
                outputs: vec!["v.txt".into()],
                resources: Resources {
                    gpus,
                    exclusive: false,
                },
                measure: false,
                env: None,
                together: None,
            }),
            root: self.store.root().to_path_buf(),
            staging: dir.join("out"),
            needs: Default::default(),
            upstream: Default::default(),
            gpus: Vec::new(),
            cores: None,
            isolated: false,
            log: dir.join("task.log"),
            record: None,
        }
    }

    /// Runs every job to its end; the results by node.
    async fn run_all(&self, jobs: Vec<Job>) -> HashMap<String, Result<Finished, NodeFailure>> {
        let handles: Vec<_> = jobs
            .into_iter()
            .map(|j| {
                let node = j.node.clone();
                (node, tokio::spawn(self.exec.run(j)))
            })
            .collect();
        let mut out = HashMap::new();
        for (node, h) in handles {
            out.insert(node, h.await.unwrap());
        }
        out
    }

    fn nodes(&self, n: usize) -> Vec<Job> {
        (0..n)
            .map(|i| self.job(&format!("gen[i={i}]"), "gen", 0))
            .collect()
    }
}

fn failure(r: &Result<Finished, NodeFailure>) -> &NodeFailure {
    r.as_ref().expect_err("a failure")
}

#[tokio::test(start_paused = true)]
async fn a_sweep_goes_out_as_one_array_and_every_job_finishes() {
    let b = bench();
    let results = b.run_all(b.nodes(5)).await;
    assert!(results.values().all(Result::is_ok), "{results:?}");
    let sbatch = b.fake.calls_of("sbatch");
    assert_eq!(sbatch.len(), 1, "{sbatch:?}");
    assert!(sbatch[0].contains("--array=0-4"), "{}", sbatch[0]);
    assert!(sbatch[0].contains("--job-name=vg-test"));
    assert!(sbatch[0].contains("slurm-job"));
    // Each job's id is journaled with its attempt (the engine then records
    // the run and ends the attempt).
    let live = b.store.reader().live_jobs().unwrap();
    assert_eq!(live.len(), 5);
    for (i, l) in live.iter().enumerate() {
        let rec: JobRecord = serde_json::from_str(&l.job.0).unwrap();
        assert_eq!(rec.job_id, Some(format!("101_{i}")));
        assert_eq!(rec.index, i);
    }
    assert_eq!(b.exec.calls()[0], 1);
}

#[tokio::test(start_paused = true)]
async fn arrays_are_chunked_below_max_array_size() {
    let fake = FakeSlurm::new();
    fake.max_array_size(3);
    let b = bench_with(&[], false, fake);
    let results = b.run_all(b.nodes(5)).await;
    assert!(results.values().all(Result::is_ok));
    let arrays: Vec<String> = b
        .fake
        .calls_of("sbatch")
        .iter()
        .map(|c| {
            c.split(' ')
                .find(|a| a.starts_with("--array"))
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(arrays, ["--array=0-1", "--array=0-1", "--array=0-0"]);
    assert_eq!(b.fake.calls_of("scontrol").len(), 1, "asked once");
}

#[tokio::test(start_paused = true)]
async fn jobs_asking_for_different_resources_go_in_different_arrays() {
    let gpu = Slurm {
        partition: Some("gpuq".into()),
        array_limit: Some(2),
        ..Slurm::default()
    };
    let b = bench_with(&[("train", gpu)], false, FakeSlurm::new());
    let mut jobs = b.nodes(2);
    jobs.push(b.job("train[i=0]", "train", 1));
    jobs.push(b.job("train[i=1]", "train", 1));
    let results = b.run_all(jobs).await;
    assert!(results.values().all(Result::is_ok));
    let mut sbatch = b.fake.calls_of("sbatch");
    sbatch.sort();
    assert_eq!(sbatch.len(), 2, "{sbatch:?}");
    let gpu_call = sbatch.iter().find(|c| c.contains("gpuq")).unwrap();
    assert!(gpu_call.contains("--partition=gpuq"), "{gpu_call}");
    assert!(gpu_call.contains("--gres=gpu:1"), "{gpu_call}");
    assert!(gpu_call.contains("--array=0-1%2"), "{gpu_call}");
    let cpu_call = sbatch.iter().find(|c| !c.contains("gpuq")).unwrap();
    assert!(!cpu_call.contains("--gres"), "{cpu_call}");
}

#[tokio::test(start_paused = true)]
async fn a_measurement_asks_for_a_node_or_with_isolation_gpu_for_its_gpu_and_bound_cores() {
    let b = bench_with(&[("timing", Slurm::default())], false, FakeSlurm::new());
    let measuring = |id: &str, isolated: bool| {
        let mut job = b.job(id, "timing", 1);
        if let TaskSpec::Command(c) = &mut job.task {
            c.resources.exclusive = true;
        }
        job.isolated = isolated;
        job
    };
    let jobs = vec![
        measuring("timing[i=0]", false),
        measuring("timing[i=1]", true),
    ];
    let results = b.run_all(jobs).await;
    assert!(results.values().all(Result::is_ok));
    let sbatch = b.fake.calls_of("sbatch");
    assert_eq!(
        sbatch.len(),
        2,
        "different resources, different arrays: {sbatch:?}"
    );
    let host = sbatch
        .iter()
        .find(|c| c.contains("--exclusive"))
        .expect("a Host measurement");
    assert!(!host.contains("--cpus-per-task"), "{host}");
    let gpu = sbatch
        .iter()
        .find(|c| !c.contains("--exclusive"))
        .expect("a Gpu measurement");
    for flag in [
        "--gres=gpu:1",
        "--cpus-per-task=4",
        "--gres-flags=enforce-binding",
    ] {
        assert!(gpu.contains(flag), "{flag} in {gpu}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_job_whose_task_exits_3_fails_naming_the_job() {
    let b = bench();
    b.fake.fate("gen[i=1]", Fate::Exit(3));
    let results = b.run_all(b.nodes(2)).await;
    assert!(results["gen[i=0]"].is_ok());
    let f = failure(&results["gen[i=1]"]);
    assert_eq!(f.kind, FailureKind::Exit);
    assert_eq!(f.exit_code, Some(3));
    let id = &b.fake.ids_of("gen[i=1]")[0];
    assert!(
        f.message.contains(&format!("SLURM job {id}")),
        "{}",
        f.message
    );
    assert!(f.message.contains("fake-node"), "{}", f.message);
}

#[tokio::test(start_paused = true)]
async fn a_busy_controller_or_munge_is_waited_out_with_backoff() {
    let b = bench();
    b.fake.sbatch_fails(&[
        "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation",
        "sbatch: error: Munge encode failed: Failed to access \"/run/munge/munge.socket.2\": No such file or directory (Did you start munged?)",
        "sbatch: error: Batch job submission failed: Protocol authentication error",
    ]);
    let t = Instant::now();
    let results = b.run_all(b.nodes(1)).await;
    assert!(results.values().all(Result::is_ok), "{results:?}");
    assert_eq!(b.fake.calls_of("sbatch").len(), 4);
    assert!(
        t.elapsed() >= Duration::from_secs(1 + 2 + 4),
        "backed off: {:?}",
        t.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_refusal_fails_its_jobs_at_once_naming_the_command() {
    let b = bench();
    b.fake.sbatch_fails(&[
        "sbatch: error: invalid partition specified: nosuch\nsbatch: error: Batch job submission failed: Invalid partition name specified",
    ]);
    let results = b.run_all(b.nodes(2)).await;
    assert_eq!(b.fake.calls_of("sbatch").len(), 1, "no retry");
    for r in results.values() {
        let f = failure(r);
        assert_eq!(f.kind, FailureKind::Unschedulable);
        assert!(f.message.contains("invalid partition"), "{}", f.message);
        assert!(
            f.message.contains("command: sbatch --parsable"),
            "{}",
            f.message
        );
        assert_eq!(f.log, None);
    }
}

#[tokio::test(start_paused = true)]
async fn too_many_transient_errors_fail_the_jobs_after_every_try() {
    let b = bench();
    b.fake
        .sbatch_fails(&["sbatch: error: Unable to contact slurm controller (connect failure)"; 9]);
    let results = b.run_all(b.nodes(1)).await;
    assert_eq!(b.fake.calls_of("sbatch").len(), 9);
    let f = failure(&results["gen[i=0]"]);
    assert_eq!(f.kind, FailureKind::Unschedulable);
    assert!(f.message.contains("(after 9 tries)"), "{}", f.message);
}

#[tokio::test(start_paused = true)]
async fn a_failed_queue_query_is_unknown_never_an_ending() {
    let b = bench();
    b.fake.squeue_fails(6);
    let results = b.run_all(b.nodes(2)).await;
    assert!(results.values().all(Result::is_ok), "{results:?}");
    assert!(b.fake.calls_of("squeue").len() >= 8);
    assert!(
        b.fake.calls_of("sacct").is_empty(),
        "nothing was taken for gone"
    );
}

#[tokio::test(start_paused = true)]
async fn a_job_gone_without_a_result_is_classified_by_sacct() {
    let b = bench();
    b.fake.fate("gen[i=0]", Fate::Vanish("TIMEOUT"));
    b.fake.fate("gen[i=1]", Fate::Vanish("OUT_OF_MEMORY"));
    b.fake.fate("gen[i=2]", Fate::Vanish("NODE_FAIL"));
    b.fake.fate("gen[i=3]", Fate::Vanish("PREEMPTED"));
    let t = Instant::now();
    let results = b.run_all(b.nodes(4)).await;
    let kinds: Vec<FailureKind> = (0..4)
        .map(|i| failure(&results[&format!("gen[i={i}]")]).kind)
        .collect();
    assert_eq!(
        kinds,
        [
            FailureKind::Time,
            FailureKind::Memory,
            FailureKind::Infra,
            FailureKind::Preempted
        ]
    );
    assert!(
        t.elapsed() >= Duration::from_secs(3),
        "the settle window: {:?}",
        t.elapsed()
    );
    assert_eq!(
        b.fake.calls_of("sacct").len(),
        1,
        "one sacct for all of them"
    );
}

#[tokio::test(start_paused = true)]
async fn without_sacct_a_vanished_job_is_lost_never_a_success() {
    let fake = FakeSlurm::new();
    fake.without_sacct();
    fake.fate("gen[i=0]", Fate::Vanish("COMPLETED"));
    let b = bench_with(&[], false, fake);
    let results = b.run_all(b.nodes(1)).await;
    assert_eq!(failure(&results["gen[i=0]"]).kind, FailureKind::Lost);
    assert!(b.fake.calls_of("sacct").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_job_cancelled_by_someone_else_fails_as_cancelled() {
    let b = bench();
    b.fake.fate("gen[i=0]", Fate::Hang);
    let exec = b.exec.clone();
    let job = b.job("gen[i=0]", "gen", 0);
    let running = tokio::spawn(exec.run(job));
    while b.fake.ids_of("gen[i=0]").is_empty() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.fake.cancel_from_outside("gen[i=0]");
    let f = running.await.unwrap().unwrap_err();
    assert_eq!(f.kind, FailureKind::Cancelled, "{}", f.message);
    assert!(b.fake.calls_of("scancel").is_empty(), "not cancelled by us");
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_cancels_every_job_with_one_scancel() {
    let b = bench();
    for i in 0..3 {
        b.fake.fate(&format!("gen[i={i}]"), Fate::Hang);
    }
    let handles: Vec<_> = b
        .nodes(3)
        .into_iter()
        .map(|j| tokio::spawn(b.exec.run(j)))
        .collect();
    while b.fake.calls_of("sbatch").is_empty() || b.fake.calls_of("squeue").len() < 2 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    b.exec.interrupt();
    for h in handles {
        assert_eq!(h.await.unwrap().unwrap_err().kind, FailureKind::Interrupted);
    }
    let scancel = b.fake.calls_of("scancel");
    assert_eq!(scancel.len(), 1, "{scancel:?}");
    for i in 0..3 {
        assert!(scancel[0].contains(&b.fake.ids_of(&format!("gen[i={i}]"))[0]));
    }
}

#[tokio::test(start_paused = true)]
async fn detach_submits_and_leaves_the_jobs_to_a_later_build() {
    let b = bench_with(&[], true, FakeSlurm::new());
    let results = b.run_all(b.nodes(2)).await;
    for r in results.values() {
        let f = failure(r);
        assert_eq!(f.kind, FailureKind::Detached);
        assert!(
            f.message.contains("submitted as SLURM job"),
            "{}",
            f.message
        );
    }
    assert_eq!(b.fake.calls_of("sbatch").len(), 1);
    assert_eq!(
        b.store.reader().live_jobs().unwrap().len(),
        2,
        "journaled with their ids"
    );
}

#[tokio::test(start_paused = true)]
async fn an_adopted_job_is_waited_for_not_submitted_again() {
    let b = bench();
    let mut job = b.job("gen[i=0]", "gen", 0);
    let dir = b
        .store
        .journal()
        .job_dir(crate::store::AttemptId(job.attempt));
    std::fs::write(
        dir.join(super::job::JOB_FILE),
        serde_json::to_vec(&job).unwrap(),
    )
    .unwrap();
    b.fake
        .queue_task("77_0", dir.clone(), "gen[i=0]", "vitgraph:/m");
    job.adopt = Some(
        serde_json::to_string(&JobRecord {
            executor: "slurm".into(),
            name: "vg-test".into(),
            manifest: PathBuf::from("/m"),
            index: 0,
            job_id: Some("77_0".into()),
            submitted_at_ms: Some(1),
            log: None,
        })
        .unwrap(),
    );
    let results = b.run_all(vec![job]).await;
    assert!(results["gen[i=0]"].is_ok(), "{results:?}");
    assert!(
        b.fake.calls_of("sbatch").is_empty(),
        "adopted, not resubmitted"
    );
}

/// A job whose driver ended between its journal entry and `sbatch`'s answer.
fn unconfirmed(b: &Bench, node: &str, manifest: &str) -> Job {
    let mut job = b.job(node, "gen", 0);
    let dir = b
        .store
        .journal()
        .job_dir(crate::store::AttemptId(job.attempt));
    std::fs::write(
        dir.join(super::job::JOB_FILE),
        serde_json::to_vec(&job).unwrap(),
    )
    .unwrap();
    job.adopt = Some(
        serde_json::to_string(&JobRecord {
            executor: "slurm".into(),
            name: "vg-test".into(),
            manifest: PathBuf::from(manifest),
            index: 0,
            job_id: None,
            submitted_at_ms: None,
            log: None,
        })
        .unwrap(),
    );
    job
}

#[tokio::test(start_paused = true)]
async fn an_unconfirmed_submission_is_found_in_the_queue_by_its_comment() {
    let b = bench();
    let job = unconfirmed(&b, "gen[i=0]", "/ws/cache/jobs/batch-1-1/manifest");
    let dir = b
        .store
        .journal()
        .job_dir(crate::store::AttemptId(job.attempt));
    b.fake.queue_task(
        "88_0",
        dir,
        "gen[i=0]",
        "vitgraph:/ws/cache/jobs/batch-1-1/manifest",
    );
    let results = b.run_all(vec![job]).await;
    assert!(results["gen[i=0]"].is_ok(), "{results:?}");
    assert!(b.fake.calls_of("sbatch").is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_unconfirmed_submission_missing_from_the_queue_is_submitted_again() {
    let b = bench();
    let job = unconfirmed(&b, "gen[i=0]", "/ws/cache/jobs/batch-1-1/manifest");
    let results = b.run_all(vec![job]).await;
    assert!(results["gen[i=0]"].is_ok(), "{results:?}");
    assert_eq!(
        b.fake.calls_of("sbatch").len(),
        1,
        "after the settle window"
    );
}

#[tokio::test(start_paused = true)]
async fn submissions_are_rate_limited() {
    let slow = Slurm {
        max_submit_per_s: Some(1.0),
        ..Slurm::default()
    };
    let stages: Vec<(String, Slurm)> = (0..3)
        .map(|i| {
            (
                format!("s{i}"),
                Slurm {
                    partition: Some(format!("p{i}")),
                    ..slow.clone()
                },
            )
        })
        .collect();
    let stages: Vec<(&str, Slurm)> = stages
        .iter()
        .map(|(n, s)| (n.as_str(), s.clone()))
        .collect();
    let b = bench_with(&stages, false, FakeSlurm::new());
    let jobs: Vec<Job> = (0..3)
        .map(|i| b.job(&format!("s{i}"), &format!("s{i}"), 0))
        .collect();
    let t = Instant::now();
    let results = b.run_all(jobs).await;
    assert!(results.values().all(Result::is_ok));
    assert_eq!(b.fake.calls_of("sbatch").len(), 3);
    assert!(
        t.elapsed() >= Duration::from_secs(2),
        "1 per second: {:?}",
        t.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn the_queue_is_asked_once_per_look_for_every_job() {
    let b = bench();
    let results = b.run_all(b.nodes(50)).await;
    assert!(results.values().all(Result::is_ok));
    let squeue = b.fake.calls_of("squeue").len();
    assert!(squeue <= 4, "one squeue per look, not per job: {squeue}");
    assert!(
        b.fake.calls_of("squeue")[0].contains("--me"),
        "every job of this user in one query"
    );
}
