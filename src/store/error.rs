//! The store's error type. Every variant names the file or directory involved
//! and says what to do next; I/O and SQLite errors are classified (disk full,
//! permission denied, damaged database) so the advice fits the cause.

use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong in `cache/`.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("cannot {action} `{}`: {source}", path.display())]
    #[diagnostic(code(vitgraph::store::io))]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
        #[help]
        help: String,
    },

    /// The state database reported an error.
    #[error("state database `{}`: {source}", path.display())]
    #[diagnostic(code(vitgraph::store::database))]
    Database {
        path: PathBuf,
        source: rusqlite::Error,
        #[help]
        help: String,
    },

    /// A bundle that cannot be imported or exported (see `bundle`).
    #[error("bundle `{}`: {detail}", path.display())]
    #[diagnostic(code(vitgraph::store::bundle))]
    Bundle {
        path: PathBuf,
        detail: String,
        #[help]
        help: String,
    },

    /// A remote that cannot be reached or holds something damaged.
    #[error("remote `{name}` (`{}`): {detail}", path.display())]
    #[diagnostic(code(vitgraph::store::remote))]
    Remote {
        name: String,
        path: PathBuf,
        detail: String,
        #[help]
        help: String,
    },

    /// A row of the state database cannot be decoded.
    #[error("state database `{}` holds a damaged record: {detail}", path.display())]
    #[diagnostic(
        code(vitgraph::store::damaged_record),
        help("move `cache/state.sqlite` and its `-wal` and `-shm` files aside and rebuild; objects in `cache/objects/` are kept and re-used")
    )]
    DamagedRecord { path: PathBuf, detail: String },

    /// The database was written by a newer vitgraph.
    #[error("state database `{}` has schema version {found}; this vitgraph understands up to {supported}", path.display())]
    #[diagnostic(
        code(vitgraph::store::schema_too_new),
        help(
            "use the vitgraph version that created this workspace's cache, or move `cache/` aside"
        )
    )]
    SchemaTooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },

    /// A read-only state database written by an older vitgraph.
    #[error("`{}` has schema version {found}, older than this vitgraph's {supported}, and is read-only", path.display())]
    #[diagnostic(
        code(vitgraph::store::schema_too_old),
        help("run any vitgraph command once where `cache/` is writable (it upgrades the database in place), or use the vitgraph version that wrote it")
    )]
    SchemaTooOld {
        path: PathBuf,
        found: i64,
        supported: i64,
    },

    /// A task succeeded but did not create one of its declared outputs.
    #[error("node `{node_id}` did not create its declared output `{name}` (expected `{}`)", path.display())]
    #[diagnostic(
        code(vitgraph::store::missing_output),
        help("make the task write `{name}` into its output directory `${{out}}`, or remove it from `outputs`")
    )]
    MissingOutput {
        node_id: String,
        name: String,
        path: PathBuf,
    },

    /// A measuring task's `results.json` is not what a measurement writes.
    #[error("node `{node_id}`: `{}` {detail}; {help}", path.display())]
    #[diagnostic(code(vitgraph::store::bad_results))]
    BadResults {
        node_id: String,
        path: PathBuf,
        detail: String,
        help: String,
    },

    /// A declared output is a directory or another non-file.
    #[error("declared output `{name}` of node `{node_id}` is not a regular file (`{}`)", path.display())]
    #[diagnostic(
        code(vitgraph::store::output_not_file),
        help("declare the files inside it instead (e.g. `{name}/result.csv`)")
    )]
    OutputNotFile {
        node_id: String,
        name: String,
        path: PathBuf,
    },

    /// A declared output name escapes the output directory.
    #[error(
        "declared output `{name}` of node `{node_id}` is not a relative path inside `${{out}}`"
    )]
    #[diagnostic(
        code(vitgraph::store::bad_output_name),
        help("write outputs as relative paths without `..`, e.g. `plots/a.svg`")
    )]
    BadOutputName { node_id: String, name: String },

    /// A recorded run refers to an object that is gone.
    #[error("object `{}` of output `{name}` of node `{node_id}` is missing from the store", object.display())]
    #[diagnostic(
        code(vitgraph::store::missing_object),
        help("`vitgraph build` runs the node again to replace it; `vitgraph verify` checks every object")
    )]
    MissingObject {
        node_id: String,
        name: String,
        object: PathBuf,
    },

    /// A stored object's bytes no longer match its name: it was set aside
    /// (`cache/damaged/`) and the node runs again instead of being restored.
    #[error("object `{}` of output `{name}` of node `{node_id}` is damaged (its content hashes to {}); it was moved to `{}`", object.display(), actual.short(), quarantined.display())]
    #[diagnostic(
        code(vitgraph::store::damaged_object),
        help("`vitgraph build` runs the node again to replace it; `vitgraph verify` checks every object")
    )]
    DamagedObject {
        node_id: String,
        name: String,
        object: PathBuf,
        actual: crate::hash::ContentHash,
        quarantined: PathBuf,
    },

    /// A declared output is a symbolic link whose target does not exist.
    #[error("declared output `{name}` of node `{node_id}` is a symbolic link to `{}`, which does not exist", target.display())]
    #[diagnostic(
        code(vitgraph::store::dangling_output),
        help("write the file itself into `${{out}}`, or link to a file that exists (relative links are read from the output directory)")
    )]
    DanglingOutput {
        node_id: String,
        name: String,
        target: PathBuf,
    },

    /// A path that must be a file (an input) is something else.
    #[error("`{}` is not a regular file", path.display())]
    #[diagnostic(
        code(vitgraph::store::not_a_file),
        help("inputs must be files; list the files inside a directory one by one")
    )]
    NotAFile { path: PathBuf },

    /// An attempt id that the database does not know.
    #[error("attempt {id} is not recorded in `{}`", path.display())]
    #[diagnostic(
        code(vitgraph::store::unknown_attempt),
        help("the state database was replaced while vitgraph was running; run the build again")
    )]
    UnknownAttempt { id: i64, path: PathBuf },
}

impl StoreError {
    /// Whether this error says a stored output cannot be restored (missing or
    /// damaged): the node must run again, replacing its recorded run.
    pub fn is_damaged_object(&self) -> bool {
        matches!(
            self,
            StoreError::MissingObject { .. } | StoreError::DamagedObject { .. }
        )
    }

    /// An I/O error, with advice chosen from its kind.
    pub(crate) fn io(action: &'static str, path: &Path, source: io::Error) -> StoreError {
        let help = io_help(&source, path);
        StoreError::Io {
            action,
            path: path.to_path_buf(),
            source,
            help,
        }
    }

    /// A SQLite error, with advice chosen from its code.
    pub(crate) fn db(path: &Path, source: rusqlite::Error) -> StoreError {
        let help = db_help(&source, path);
        StoreError::Database {
            path: path.to_path_buf(),
            source,
            help,
        }
    }

    /// Whether this error means the file system is full.
    pub fn is_disk_full(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            StoreError::Database { source, .. } => {
                source.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull)
            }
            _ => false,
        }
    }
}

fn io_help(err: &io::Error, path: &Path) -> String {
    let dir = path.parent().unwrap_or(path).display();
    match err.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
            format!("the file system holding `{dir}` is full: free some space (`vitgraph gc` removes unreferenced objects) and run again")
        }
        Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => {
            format!("make `{dir}` writable by this user (the workspace's `cache/` and `out/` must be writable)")
        }
        Some(libc::EXDEV) => {
            "`cache/staging/` and `cache/objects/` must be on one file system; do not mount or link them apart".to_string()
        }
        _ => format!("check that `{dir}` exists and is accessible, then run again"),
    }
}

fn db_help(err: &rusqlite::Error, path: &Path) -> String {
    use rusqlite::ErrorCode as C;
    let shown = path.display();
    match err.sqlite_error_code() {
        Some(C::DiskFull) => format!(
            "the file system holding `{shown}` is full: free some space (`vitgraph gc` removes unreferenced objects) and run again"
        ),
        Some(C::ReadOnly) | Some(C::PermissionDenied) | Some(C::CannotOpen) => format!(
            "make `{shown}` and its directory writable by this user"
        ),
        Some(C::DatabaseCorrupt) | Some(C::NotADatabase) => format!(
            "`{shown}` is damaged: move it and its `-wal` and `-shm` files aside and rebuild; objects in `cache/objects/` are kept and re-used"
        ),
        Some(C::DatabaseBusy) | Some(C::DatabaseLocked) => {
            "another vitgraph process held the database too long; wait for it to finish and run again".to_string()
        }
        _ => format!("if this persists, move `{shown}` and its `-wal` and `-shm` files aside and rebuild"),
    }
}

/// Attaches a path to I/O results.
pub(crate) trait IoContext<T> {
    fn ctx(self, action: &'static str, path: &Path) -> Result<T, StoreError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, action: &'static str, path: &Path) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::io(action, path, e))
    }
}
