//! Probing the machine: GPU model and driver through `nvidia-smi`, CPU model
//! from `/proc/cpuinfo`. Works without a GPU (facets then read "none").

use std::collections::BTreeMap;
use std::process::Command;

/// The key-affecting facets of this machine.
pub fn key_facets() -> BTreeMap<String, String> {
    let mut f = BTreeMap::new();
    let (gpu, driver, cuda) = nvidia_smi();
    f.insert("gpu".into(), gpu);
    f.insert("driver_major".into(), driver);
    f.insert("cuda".into(), cuda);
    f.insert("cpu".into(), cpu_model());
    f
}

fn nvidia_smi() -> (String, String, String) {
    let none = || ("none".to_string(), "none".to_string(), "none".to_string());
    let Ok(out) = Command::new("nvidia-smi")
        .args(["--query-gpu=name,driver_version", "--format=csv,noheader"])
        .output()
    else {
        return none();
    };
    if !out.status.success() {
        return none();
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(first) = text.lines().next() else {
        return none();
    };
    let mut parts = first.split(',').map(str::trim);
    let gpu = parts.next().unwrap_or("none").to_string();
    let driver = parts
        .next()
        .unwrap_or("none")
        .split('.')
        .next()
        .unwrap_or("none")
        .to_string();
    let cuda = Command::new("nvidia-smi")
        .output()
        .ok()
        .and_then(|o| {
            let t = String::from_utf8_lossy(&o.stdout).into_owned();
            t.split("CUDA Version:")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "none".into());
    (gpu, driver, cuda)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}
