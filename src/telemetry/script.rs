//! A scripted GPU probe: readings from a JSON file instead of a GPU, so
//! that throttling, intruders and a missing NVML can be played on any
//! machine (`VITGRAPH_TELEMETRY_SCRIPT=path`).
//!
//! The file is a list of phases; each is a [`Reading`] (missing fields
//! take their defaults) with `after_ms`, the time since the probe was made
//! from which it applies, and the last phase that has begun is read:
//!
//! ```json
//! [{"after_ms": 0, "sm_mhz": 1980, "temp_c": 40},
//!  {"after_ms": 0, "sm_mhz": 1600, "reasons": 4}]
//! ```
//!
//! `{"fail": "why"}` as a file's only phase plays a probe that cannot start.

use std::time::Instant;

use serde::Deserialize;

use super::{GpuProbe, Reading};

pub(super) const ENV: &str = "VITGRAPH_TELEMETRY_SCRIPT";

#[derive(Debug, Clone, Deserialize)]
struct Phase {
    #[serde(default)]
    after_ms: f64,
    #[serde(default)]
    fail: Option<String>,
    #[serde(flatten)]
    reading: Reading,
}

/// A probe that plays a script.
#[derive(Debug, Clone)]
pub struct Scripted {
    phases: Vec<Phase>,
    start: Instant,
}

impl Scripted {
    /// The script `VITGRAPH_TELEMETRY_SCRIPT` names, if it is set; an error
    /// names the file and what is wrong with it.
    pub fn from_env() -> Result<Option<Scripted>, String> {
        let Some(path) = std::env::var_os(ENV) else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{ENV}={}: {e}", path.to_string_lossy()))?;
        Scripted::parse(&text)
            .map(Some)
            .map_err(|e| format!("{ENV}={}: {e}", path.to_string_lossy()))
    }

    /// A script from its JSON text.
    pub fn parse(text: &str) -> Result<Scripted, String> {
        let phases: Vec<Phase> = serde_json::from_str(text)
            .map_err(|e| format!("not a list of telemetry phases: {e}"))?;
        if let Some(why) = phases.iter().find_map(|p| p.fail.clone()) {
            return Err(why);
        }
        if phases.is_empty() {
            return Err("the script has no phase".to_owned());
        }
        Ok(Scripted {
            phases,
            start: Instant::now(),
        })
    }
}

impl GpuProbe for Scripted {
    fn read(&mut self) -> Result<Reading, String> {
        let now = self.start.elapsed().as_secs_f64() * 1e3;
        let phase = self
            .phases
            .iter()
            .rev()
            .find(|p| p.after_ms <= now)
            .unwrap_or(&self.phases[0]);
        let mut reading = phase.reading.clone();
        // `0` in a script's process list stands for this process.
        for pid in &mut reading.processes {
            if *pid == 0 {
                *pid = std::process::id();
            }
        }
        Ok(reading)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plays_the_phase_that_has_begun() {
        let mut s = Scripted::parse(
            r#"[{"after_ms": 0, "sm_mhz": 1980, "processes": [0]},
                {"after_ms": 1e9, "sm_mhz": 100}]"#,
        )
        .expect("parses");
        let r = s.read().expect("reads");
        assert_eq!(r.sm_mhz, 1980);
        assert_eq!(r.processes, [std::process::id()]);
        s.phases[1].after_ms = 0.0;
        assert_eq!(s.read().expect("reads").sm_mhz, 100);
    }

    #[test]
    fn a_failing_or_malformed_script_says_why() {
        assert_eq!(
            Scripted::parse(r#"[{"fail": "NVML not found"}]"#).expect_err("fails"),
            "NVML not found"
        );
        assert!(Scripted::parse("{}")
            .expect_err("not a list")
            .contains("not a list"));
        assert!(Scripted::parse("[]")
            .expect_err("empty")
            .contains("no phase"));
    }
}
