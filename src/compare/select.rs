//! Which recorded runs a side of a comparison names:
//!
//! | form | the runs |
//! |---|---|
//! | `HEAD` (or `current`) | each node's current run: the study as it stands |
//! | `build:N` | the runs build N measured (1 is the first; `build:-1` the latest, `build:-2` the one before) |
//! | `baseline:NAME` | the runs saved by `vitgraph baseline save NAME` |
//! | `env:KEY=VALUE[,KEY=VALUE]` | per node, the latest recorded run whose environment facets match (`env:libtorch=2.10.0`; `torch` is `libtorch`; a value matches up to a `+`) |
//! | `date:YYYY-MM-DD[THH:MM]` | per node, the latest run started by then (a date alone: by its end), UTC |
//!
//! Any of them may name another workspace: `workspace:DIR` (its current
//! runs) or `workspace:DIR#build:3`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::store::{BuildSummary, Holding, RecordedRun, Store};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Selector {
    Current,
    Build(i64),
    Baseline(String),
    Env(Vec<(String, String)>),
    /// Runs started before this moment (ms since the epoch).
    Date(i64),
}

/// One side: a selector, in this workspace or another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Side {
    pub text: String,
    pub workspace: Option<PathBuf>,
    pub selector: Selector,
}

const FORMS: &str = "HEAD, build:N, build:-1, baseline:NAME, env:KEY=VALUE, \
                     date:YYYY-MM-DD, or workspace:DIR[#one of those]";

impl Side {
    pub(crate) fn parse(text: &str) -> Result<Side, String> {
        if let Some(rest) = text.strip_prefix("workspace:") {
            let (dir, inner) = match rest.split_once('#') {
                Some((d, s)) => (d, Selector::parse(s, text)?),
                None => (rest, Selector::Current),
            };
            if dir.is_empty() {
                return Err(format!(
                    "`{text}`: `workspace:` needs a folder (`workspace:../h200-study`)"
                ));
            }
            return Ok(Side {
                text: text.to_owned(),
                workspace: Some(PathBuf::from(dir)),
                selector: inner,
            });
        }
        Ok(Side {
            text: text.to_owned(),
            workspace: None,
            selector: Selector::parse(text, text)?,
        })
    }
}

impl Selector {
    fn parse(text: &str, whole: &str) -> Result<Selector, String> {
        let bad = |why: String| format!("`{whole}`: {why} (a side is one of: {FORMS})");
        if text == "HEAD" || text == "current" {
            return Ok(Selector::Current);
        }
        let Some((kind, arg)) = text.split_once(':') else {
            return Err(bad("not a run set".into()));
        };
        match kind {
            "build" => arg
                .parse::<i64>()
                .ok()
                .filter(|n| *n != 0)
                .map(Selector::Build)
                .ok_or_else(|| {
                    bad(format!(
                        "`{arg}` is not a build number (1, 2, … or -1 for the latest)"
                    ))
                }),
            "baseline" if !arg.is_empty() => Ok(Selector::Baseline(arg.to_owned())),
            "env" => {
                let pairs: Option<Vec<(String, String)>> = arg
                    .split(',')
                    .map(|kv| {
                        let (k, v) = kv.split_once('=')?;
                        let k = if k == "torch" { "libtorch" } else { k };
                        (!k.is_empty() && !v.is_empty()).then(|| (k.to_owned(), v.to_owned()))
                    })
                    .collect();
                pairs
                    .map(Selector::Env)
                    .ok_or_else(|| bad(format!("`{arg}` is not KEY=VALUE[,KEY=VALUE]")))
            }
            "date" => {
                let at = crate::clock::parse_utc(arg)
                    .ok_or_else(|| bad(format!("`{arg}` is not YYYY-MM-DD or YYYY-MM-DDTHH:MM")))?;
                let whole_day = !arg.contains(['T', ' ']);
                Ok(Selector::Date(if whole_day { at + 86_400_000 } else { at }))
            }
            _ => Err(bad(format!("`{kind}:` is not a kind of run set"))),
        }
    }
}

/// The builds of each workspace a comparison reads, found once: both sides
/// of `compare build:-2 build:-1` name builds of one store, and finding
/// them reads every attempt it recorded.
#[derive(Default)]
pub(crate) struct Builds(std::sync::Mutex<HashMap<PathBuf, Vec<BuildSummary>>>);

impl Builds {
    fn of(&self, store: &Store) -> Result<Vec<BuildSummary>, crate::store::StoreError> {
        // Held while the first side reads them: the second waits, then
        // takes the same list.
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(builds) = known.get(store.root()) {
            return Ok(builds.clone());
        }
        let builds = store.reader().builds()?;
        known.insert(store.root().to_path_buf(), builds.clone());
        Ok(builds)
    }
}

/// The store `side` reads, the runs it names, and a line describing them.
pub(crate) fn resolve(
    side: &Side,
    here: &Path,
    builds: &Builds,
    holding: Holding,
) -> Result<(Store, Vec<RecordedRun>, String), super::CompareError> {
    use super::CompareError;
    let root = side.workspace.clone().unwrap_or_else(|| here.to_path_buf());
    let err = |e: crate::store::StoreError| CompareError::Store(format!("`{}`: {e}", side.text));
    let store = Store::open_existing(&root).map_err(err)?.ok_or_else(|| {
        format!(
            "`{}`: {} has no recorded runs (no `cache/state.sqlite`)",
            side.text,
            root.display()
        )
    })?;
    store.reader().read_once().map_err(err)?;
    let (runs, what) = match &side.selector {
        Selector::Current => (
            store.reader().current_runs(holding).map_err(err)?,
            "current runs".to_owned(),
        ),
        Selector::Build(n) => build(&store, builds, *n, &side.text, holding)?,
        Selector::Baseline(name) => {
            let runs = store.reader().baseline_runs(name, holding).map_err(err)?.ok_or_else(|| {
                let names: Vec<String> = store
                    .reader().baselines()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|b| b.name)
                    .collect();
                format!(
                    "`{}`: no baseline `{name}` (saved: {}); `vitgraph baseline save {name}` saves the current runs",
                    side.text,
                    if names.is_empty() { "none".to_owned() } else { names.join(", ") }
                )
            })?;
            (runs, format!("baseline {name}"))
        }
        Selector::Env(pairs) => {
            let all = store.reader().recorded_runs(holding).map_err(err)?;
            let matching = all.into_iter().filter(|r| env_matches(r, pairs)).collect();
            (
                latest_per_node(matching),
                "latest runs in that environment".into(),
            )
        }
        Selector::Date(at) => {
            let all = store.reader().recorded_runs(holding).map_err(err)?;
            let before = all.into_iter().filter(|r| r.started_at_ms < *at).collect();
            let when = crate::clock::utc(*at);
            (
                latest_per_node(before),
                format!("latest runs started before {when}"),
            )
        }
    };
    let place = side
        .workspace
        .as_ref()
        .map(|d| format!(" in {}", d.display()))
        .unwrap_or_default();
    Ok((store, runs, format!("{what}{place}")))
}

fn build(
    store: &Store,
    known: &Builds,
    n: i64,
    text: &str,
    holding: Holding,
) -> Result<(Vec<RecordedRun>, String), String> {
    let builds = known.of(store).map_err(|e| format!("`{text}`: {e}"))?;
    let index = if n > 0 {
        n - 1
    } else {
        builds.len() as i64 + n
    };
    let Some(chosen) = usize::try_from(index).ok().and_then(|i| builds.get(i)) else {
        return Err(format!(
            "`{text}`: the store has recorded {} build{} (build:1 … build:{}, or build:-1 for the latest)",
            builds.len(),
            if builds.len() == 1 { "" } else { "s" },
            builds.len()
        ));
    };
    let runs = store
        .reader()
        .build_runs(chosen, holding)
        .map_err(|e| format!("`{text}`: {e}"))?;
    Ok((
        runs,
        format!(
            "build {} (started {})",
            chosen.number,
            crate::clock::utc(chosen.started_at_ms)
        ),
    ))
}

fn env_matches(run: &RecordedRun, pairs: &[(String, String)]) -> bool {
    let parts: serde_json::Value = serde_json::from_str(&run.parts).unwrap_or_default();
    let env = parts.get("env");
    pairs.iter().all(|(k, want)| {
        env.and_then(|e| e.get(k))
            .and_then(|v| v.as_str())
            .is_some_and(|have| {
                have == want
                    || have
                        .strip_prefix(want.as_str())
                        .is_some_and(|rest| rest.starts_with('+'))
            })
    })
}

/// The last run of each node, in the order given (oldest first).
fn latest_per_node(runs: Vec<RecordedRun>) -> Vec<RecordedRun> {
    let mut last: HashMap<String, RecordedRun> = HashMap::new();
    for run in runs {
        last.insert(run.node_id.clone(), run);
    }
    let mut out: Vec<RecordedRun> = last.into_values().collect();
    out.sort_by(|a, b| a.node_id.cmp(&b.node_id));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_parse_or_list_the_forms() {
        assert_eq!(Side::parse("HEAD").unwrap().selector, Selector::Current);
        assert_eq!(
            Side::parse("build:-1").unwrap().selector,
            Selector::Build(-1)
        );
        assert_eq!(
            Side::parse("baseline:main").unwrap().selector,
            Selector::Baseline("main".into())
        );
        assert_eq!(
            Side::parse("env:torch=2.10.0,gpu=H100").unwrap().selector,
            Selector::Env(vec![
                ("libtorch".into(), "2.10.0".into()),
                ("gpu".into(), "H100".into())
            ])
        );
        let day = crate::clock::parse_utc("2026-11-21").unwrap();
        assert_eq!(
            Side::parse("date:2026-11-20").unwrap().selector,
            Selector::Date(day)
        );
        let other = Side::parse("workspace:../h200#build:2").unwrap();
        assert_eq!(other.workspace, Some(PathBuf::from("../h200")));
        assert_eq!(other.selector, Selector::Build(2));
        for bad in [
            "build:0",
            "build:x",
            "nightly",
            "env:torch",
            "date:soon",
            "what:1",
            "workspace:",
        ] {
            let e = Side::parse(bad).unwrap_err();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }
}
