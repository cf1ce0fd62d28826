//! Reading `pipelines/**/*.ron` into a validated, expanded [`crate::graph::Graph`].
//!
//! Two steps, as the file format deserves: [`syntax`] parses RON into a tree
//! that keeps every value's span; [`load`] checks the pipeline structure,
//! expands matrices, `for_each` and `needs` into nodes, and deserializes each
//! node's task through [`de`], which substitutes params. Every error is a
//! [`PipelineError`] that underlines the place in the file and says what to do.

pub mod cache;
pub mod de;
mod de_error;
mod decl;
mod error;
mod expand;
mod files;
mod hydra;
mod hydra_runs;
mod load;
mod nodes;
mod overrides;
mod plots;
mod repeat;
mod settings;
mod subst;
pub mod syntax;
mod together;

pub use error::{PipelineError, Sources};
pub use load::{load, pipeline_files};
pub use nodes::node_id;
pub use overrides::Override;
pub use plots::{refusal_error, refusal_line};
pub use settings::{load_settings, FILE as SETTINGS_FILE};

use crate::value::Value;
use syntax::{Kind, Node};

pub use crate::suggest::did_you_mean;

/// The plain value of a spanned node, if it is a scalar or a list of them.
pub fn value_of(node: &Node) -> Option<Value> {
    Some(match &node.kind {
        Kind::Bool(b) => Value::Bool(*b),
        Kind::Int(i) => Value::Int(*i),
        Kind::Float(x) => Value::Float(*x),
        Kind::Str { value, .. } => Value::Str(value.clone()),
        Kind::Unit(i) => Value::Str(i.name.clone()),
        Kind::List(items) => Value::List(items.iter().map(value_of).collect::<Option<Vec<_>>>()?),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
