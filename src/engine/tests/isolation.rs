//! `isolation: Gpu` on a simulated machine (2 NUMA nodes × 8 cores, 4 GPUs
//! on each): measurements on different GPUs run at once, each pinned to
//! cores of its GPU's node; other nodes share the remaining cores; a
//! measurement of `isolation: Host` still runs alone, unpinned.

use super::*;
use crate::host::topology::Topology;

const ISOLATED: &str = r#"Pipeline(stages: {
    "timing": Stage(matrix: {"m": [1, 2, 3, 4, 5, 6, 7, 8]}, isolation: Gpu,
                    task: Command(run: "t ${m}", measure: true, outputs: ["results.json"],
                                  resources: (gpus: 1, exclusive: true))),
    "cpu": Stage(matrix: {"c": [1, 2]}, task: Command(run: "cpu ${c}", outputs: ["r.txt"])),
    "host": Stage(task: Command(run: "h", measure: true, outputs: ["results.json"],
                                resources: (gpus: 1, exclusive: true))),
})"#;

#[test]
fn isolated_measurements_run_at_once_on_their_gpus_cores() {
    let b = Bench::new(ISOLATED, &[]);
    let topology = Topology::simulated(2, 8, 4);
    for id in (1..=8)
        .map(|m| format!("timing[m={m}]"))
        .chain(["cpu[c=1]".to_owned(), "cpu[c=2]".to_owned()])
    {
        b.fake.plan(&id, Plan::Sleep(Duration::from_millis(500)));
    }
    let o = b.build(Opts {
        jobs: 16,
        gpus: "0,1,2,3,4,5,6,7",
        topology: Some(topology.clone()),
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Success, "{:?}", o.events);
    let ran = b.fake.ran();
    let timing: Vec<_> = ran
        .iter()
        .filter(|r| r.node.starts_with("timing"))
        .collect();
    assert_eq!(timing.len(), 8);
    let mut gpus_seen = Vec::new();
    for r in &timing {
        assert_eq!(r.gpus.len(), 1, "{r:?}");
        let gpu = crate::gpu::GpuId::parse(&r.gpus[0]).expect("an index");
        let node = topology.gpu_node[&gpu];
        let cores = r.cores.as_ref().expect("an isolated node is pinned");
        assert_eq!(cores.len(), 1, "{r:?}");
        assert!(
            topology.nodes[&node].contains(&cores[0]),
            "{r:?} off its GPU's node"
        );
        gpus_seen.push(r.gpus[0].clone());
    }
    gpus_seen.sort();
    gpus_seen.dedup();
    assert_eq!(gpus_seen.len(), 8, "every GPU used once");
    // The last to start ran beside the seven others.
    assert!(
        timing
            .iter()
            .any(|r| r.beside.iter().filter(|n| n.starts_with("timing")).count() == 7),
        "{timing:?}"
    );
    for r in ran.iter().filter(|r| r.node.starts_with("cpu")) {
        assert_eq!(r.cores, Some(vec![0, 1, 2, 3, 8, 9, 10, 11]), "{r:?}");
    }
    let host = ran.iter().find(|r| r.node == "host").expect("host ran");
    assert!(host.beside.is_empty(), "{host:?}");
    assert_eq!(host.cores, None, "the whole machine");
    assert!(
        ran.iter().all(|r| !r.beside.contains(&"host".to_owned())),
        "nothing beside a Host measurement"
    );
}

#[test]
fn without_isolation_measurements_run_one_at_a_time_unpinned() {
    let b = Bench::new(&ISOLATED.replace("isolation: Gpu,", ""), &[]);
    let o = b.build(Opts {
        jobs: 16,
        gpus: "0,1,2,3,4,5,6,7",
        topology: Some(Topology::simulated(2, 8, 4)),
        ..Opts::default()
    });
    assert_eq!(o.status, BuildStatus::Success, "{:?}", o.events);
    for r in b.fake.ran() {
        assert_eq!(r.cores, None, "no partition without isolation: Gpu: {r:?}");
        if r.node.starts_with("timing") || r.node == "host" {
            assert!(r.beside.is_empty(), "{r:?}");
        }
    }
}
