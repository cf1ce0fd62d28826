//! Measurement hygiene shared by the hardware-measuring tasks: what they ask
//! of the scheduler (an exclusive slot, one GPU for a CUDA device) and the
//! command prefixes the engine puts before the child `vitgraph exec-task`
//! (`numactl` for `numa: Some(N)`, `nsys profile` for `trace: Nsys`).

use std::path::{Path, PathBuf};

use super::error::TaskError;
use super::vit::Trace;
use super::{Resources, TaskSpec};

/// A timing node runs alone; a CUDA device takes one GPU.
pub fn device_resources(device: &str) -> Resources {
    Resources {
        gpus: u32::from(device.starts_with("cuda")),
        exclusive: true,
    }
}

/// `numactl --cpunodebind=N --membind=N` for a node with `numa: Some(N)`;
/// `None` for every other node. An error names what is missing.
pub fn numa_prefix(spec: &TaskSpec) -> Result<Option<Vec<String>>, TaskError> {
    let numa = match spec {
        TaskSpec::Vit(v) => v.numa,
        TaskSpec::OpBench(o) => o.numa,
        _ => None,
    };
    let Some(node) = numa else { return Ok(None) };
    if find_program("numactl").is_none() {
        return Err(TaskError::unavailable(
            "numactl",
            format!("`numa: Some({node})` runs the task under numactl, which is not installed"),
            "install numactl (`apt-get install numactl`) or remove `numa`",
        ));
    }
    let sys = Path::new("/sys/devices/system/node");
    if !sys.join(format!("node{node}")).is_dir() {
        let online =
            std::fs::read_to_string(sys.join("online")).unwrap_or_else(|_| "unknown".into());
        return Err(TaskError::unavailable(
            "numa",
            format!(
                "`numa: Some({node})` names a NUMA node this machine does not have (online: {})",
                online.trim()
            ),
            "pick a node listed by `numactl --hardware`",
        ));
    }
    Ok(Some(vec![
        "numactl".into(),
        format!("--cpunodebind={node}"),
        format!("--membind={node}"),
    ]))
}

/// `nsys profile … -o <out>/trace` for a `Vit` node with `trace: Nsys`, so the
/// node's `trace.nsys-rep` lands in its staging directory.
pub fn nsys_prefix(spec: &TaskSpec, out: &Path) -> Result<Option<Vec<String>>, TaskError> {
    let TaskSpec::Vit(v) = spec else {
        return Ok(None);
    };
    if v.trace != Trace::Nsys {
        return Ok(None);
    }
    let Some(nsys) = find_program("nsys") else {
        return Err(TaskError::unavailable(
            "nsys",
            "`trace: Nsys` runs the task under `nsys profile`, and nsys is not on PATH",
            "install Nsight Systems, or use `trace: Cupti`, which needs only libcupti",
        ));
    };
    Ok(Some(vec![
        nsys.display().to_string(),
        "profile".into(),
        "--trace=cuda,nvtx,osrt".into(),
        "--force-overwrite=true".into(),
        "--output".into(),
        out.join("trace").display().to_string(),
    ]))
}

/// Both prefixes in the order they wrap the child: numactl binds nsys too.
pub fn command_prefix(spec: &TaskSpec, out: &Path) -> Result<Vec<String>, TaskError> {
    let mut prefix = numa_prefix(spec)?.unwrap_or_default();
    prefix.extend(nsys_prefix(spec, out)?.unwrap_or_default());
    Ok(prefix)
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vit(extra: &str) -> TaskSpec {
        let spec = ron::from_str(&format!(
            "(model: \"vit16x2x64\", device: \"cuda\", {extra})"
        ))
        .expect("spec parses");
        TaskSpec::Vit(spec)
    }

    #[test]
    fn cuda_tasks_take_one_gpu_exclusively() {
        assert_eq!(
            vit("").resources(),
            Resources {
                gpus: 1,
                exclusive: true
            }
        );
        assert!(vit("").measures_hardware());
        assert_eq!(
            device_resources("cpu"),
            Resources {
                gpus: 0,
                exclusive: true
            }
        );
    }

    #[test]
    fn numa_prefix_binds_cpu_and_memory_or_names_what_is_missing() {
        assert_eq!(numa_prefix(&vit("")).expect("no numa, no prefix"), None);
        match numa_prefix(&vit("numa: Some(0)")) {
            Ok(Some(prefix)) => assert_eq!(prefix, ["numactl", "--cpunodebind=0", "--membind=0"]),
            Ok(None) => panic!("numa: Some(0) must give a prefix"),
            Err(e) => assert!(
                e.to_string().contains("numactl") || e.to_string().contains("numa"),
                "{e}"
            ),
        }
        let err = numa_prefix(&vit("numa: Some(999)")).expect_err("node 999 does not exist");
        let text = err.to_string();
        assert!(
            text.contains("Some(999)") || text.contains("numactl"),
            "{text}"
        );
    }

    #[test]
    fn nsys_prefix_only_for_trace_nsys() {
        let out = Path::new("/tmp/node");
        assert_eq!(nsys_prefix(&vit(""), out).expect("no trace"), None);
        match nsys_prefix(&vit("trace: Nsys"), out) {
            Ok(Some(prefix)) => assert!(prefix.contains(&"/tmp/node/trace".to_owned())),
            Ok(None) => panic!("trace: Nsys must give a prefix"),
            Err(e) => assert!(e.to_string().contains("nsys"), "{e}"),
        }
    }
}
