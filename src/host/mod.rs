//! This machine: the environment fingerprint a hardware measurement is keyed
//! with ([`env`]) and the libtorch executable that runs libtorch tasks
//! ([`torch_exe`]), and the software a `Command` declares ([`software`]). Below the engine, the store, SLURM and the tasks, which
//! all ask it; it asks nothing of them.

pub mod env;
pub mod process;
pub mod software;
pub mod topology;
pub mod torch_exe;
