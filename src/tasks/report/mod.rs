//! `Report`: joins the files of many upstream nodes (`metrics.json`,
//! `results.json`) with their params into `table.csv` and `table.parquet`,
//! writes `report.md` (environment, sample sizes, the table, a comparison)
//! and plots under `plots/`.
//!
//! The flow: [`load`] reads each node's files, [`join`] merges nodes with
//! equal params into rows, [`table`] lays rows out as columns and groups them
//! by environment, [`compare`] and [`plot`] read the table, [`write`] and
//! [`markdown`] write it out.

mod aa;
mod axes;
mod cell;
mod compare;
mod facet;
mod fold;
mod join;
mod labels;
mod load;
mod markdown;
mod plot;
mod preflight;
mod run;
mod spec;
mod table;
mod write;
mod zigzag;

pub(crate) use load::lookup;
pub use preflight::check_plots;
pub use run::run;
pub use spec::{Compare, Plot, ReportSpec, VERSION};
