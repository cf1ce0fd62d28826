//! GPU identities as CUDA names them, and the one parser of
//! `CUDA_VISIBLE_DEVICES`.
//!
//! A GPU slot is handed to a task by writing its id into the task's
//! `CUDA_VISIBLE_DEVICES`, so an id is kept exactly as it was given: an index
//! (`0`), a GPU UUID (`GPU-8f6c…`, or a unique prefix of one) or a MIG
//! instance (`MIG-…`, or the older `MIG-GPU-…/1/0`). SLURM and container
//! runtimes hand out UUIDs as often as indexes; reading only integers would
//! see no GPU at all.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One visible device, as `CUDA_VISIBLE_DEVICES` names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuId(String);

impl GpuId {
    /// The id of the device with this index.
    pub fn index(i: u32) -> GpuId {
        GpuId(i.to_string())
    }

    /// Parses one id; None when CUDA would not accept it.
    pub fn parse(text: &str) -> Option<GpuId> {
        let t = text.trim();
        let valid = if let Some(rest) = t.strip_prefix("MIG-") {
            !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '/')
        } else if let Some(rest) = t.strip_prefix("GPU-") {
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        } else {
            !t.is_empty() && t.len() <= 9 && t.chars().all(|c| c.is_ascii_digit())
        };
        valid.then(|| GpuId(t.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The index, for an id that is one.
    pub fn as_index(&self) -> Option<u32> {
        self.0.parse().ok()
    }
}

impl fmt::Display for GpuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An index is written as a number (as `build --json` always did), any other
/// id as a string.
impl Serialize for GpuId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.as_index() {
            Some(i) => s.serialize_u32(i),
            None => s.serialize_str(&self.0),
        }
    }
}

impl<'de> Deserialize<'de> for GpuId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<GpuId, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Index(u32),
            Name(String),
        }
        match Raw::deserialize(d)? {
            Raw::Index(i) => Ok(GpuId::index(i)),
            Raw::Name(s) => GpuId::parse(&s)
                .ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not a GPU id"))),
        }
    }
}

/// The devices a `CUDA_VISIBLE_DEVICES` value makes visible, in order.
///
/// As in CUDA, the list ends at the first entry that is not a device id
/// (`0,1,-1,2` makes 0 and 1 visible), and an empty value, or SLURM's
/// `NoDevFiles`, makes none visible. A repeated id counts once.
pub fn parse_visible_devices(value: &str) -> Vec<GpuId> {
    let mut out: Vec<GpuId> = Vec::new();
    for entry in value.split(',') {
        match GpuId::parse(entry) {
            Some(id) if !out.contains(&id) => out.push(id),
            Some(_) => {}
            None => break,
        }
    }
    out
}

/// The devices this process may use according to its environment: None when
/// `CUDA_VISIBLE_DEVICES` is unset (every device of the machine is visible).
pub fn visible_from_env() -> Option<Vec<GpuId>> {
    std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .map(|v| parse_visible_devices(&v))
}

/// Parses the `--gpus` flag: ids separated by commas, every one valid.
pub fn parse_flag(value: &str) -> Result<Vec<GpuId>, String> {
    let mut out = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let id = GpuId::parse(entry).ok_or_else(|| {
            format!("`{entry}` is not a GPU id: write an index (`0`), a UUID (`GPU-…`) or a MIG id (`MIG-…`)")
        })?;
        if !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &str) -> Vec<String> {
        parse_visible_devices(v)
            .into_iter()
            .map(|g| g.to_string())
            .collect()
    }

    #[test]
    fn indexes_uuids_and_mig_ids_are_devices() {
        assert_eq!(ids("0,1"), ["0", "1"]);
        assert_eq!(ids(" 2 , 3 "), ["2", "3"]);
        assert_eq!(
            ids("GPU-8f6c1d2e-aaaa-bbbb-cccc-0123456789ab,GPU-1a2b"),
            ["GPU-8f6c1d2e-aaaa-bbbb-cccc-0123456789ab", "GPU-1a2b"]
        );
        assert_eq!(
            ids("MIG-3c1e9f0a-1111-2222-3333-444455556666"),
            ["MIG-3c1e9f0a-1111-2222-3333-444455556666"]
        );
        assert_eq!(
            ids("MIG-GPU-8f6c1d2e-aaaa-bbbb-cccc-0123456789ab/1/0"),
            ["MIG-GPU-8f6c1d2e-aaaa-bbbb-cccc-0123456789ab/1/0"]
        );
    }

    #[test]
    fn the_list_ends_at_the_first_invalid_entry_as_in_cuda() {
        assert_eq!(ids("0,1,-1,2"), ["0", "1"]);
        assert!(ids("").is_empty());
        assert!(ids("NoDevFiles").is_empty());
        assert!(ids("-1").is_empty());
        assert_eq!(ids("1,1,0"), ["1", "0"]);
    }

    #[test]
    fn the_flag_rejects_what_is_not_an_id() {
        assert_eq!(parse_flag("0,GPU-ab").unwrap().len(), 2);
        assert!(parse_flag("0,gpu0").unwrap_err().contains("`gpu0`"));
    }

    #[test]
    fn indexes_serialize_as_numbers_and_uuids_as_strings() {
        let list = vec![GpuId::index(3), GpuId::parse("GPU-ab12").unwrap()];
        let json = serde_json::to_string(&list).unwrap();
        assert_eq!(json, r#"[3,"GPU-ab12"]"#);
        let back: Vec<GpuId> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, list);
    }
}
