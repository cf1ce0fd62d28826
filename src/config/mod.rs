//! Settings as plain data: what `vitgraph.ron` and a stage's `slurm:` and
//! `placement:` say ([`cluster`]), and the remotes runs travel to
//! ([`remote`]). The pipeline reads them, the graph
//! carries them, the SLURM executor and the command line use them; this
//! module imports none of those.

pub(crate) mod cluster;
pub(crate) mod remote;

pub(crate) use cluster::*;
pub(crate) use remote::*;
