//! Signing keys: `vitgraph key generate`, the key a command signs with
//! (`--sign FILE` or `VITGRAPH_SIGNING_KEY`), and the keys a workspace
//! trusts (`trusted_keys` and `require_signed` in `vitgraph.ron`).

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::{usage, Failure};
use crate::exit;
use crate::store::{SecretKey, Trust};
use crate::workspace::Workspace;

#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Make a signing key: its secret into FILE (readable by you alone),
    /// its public key printed for the `trusted_keys` of workspaces.
    Generate {
        /// The signer's name, e.g. the measuring host or `ci`.
        name: String,
        /// Where to write the secret key (default `NAME.vitgraph-key`, here).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

pub(super) fn key(cmd: KeyCommand) -> Result<i32, Failure> {
    let KeyCommand::Generate { name, output } = cmd;
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(usage(
            format!("`{name}` cannot name a key"),
            "use letters, digits, `-`, `_` and `.`, e.g. `gpu-lab` or `ci`",
        ));
    }
    let path = output.unwrap_or_else(|| PathBuf::from(format!("{name}.vitgraph-key")));
    if path.exists() {
        return Err(usage(
            format!("`{}` exists; a key is never overwritten", path.display()),
            "choose another file with `-o FILE`, or remove that one if you mean to replace its key",
        ));
    }
    let key = SecretKey::generate(&name).map_err(|e| {
        Failure::Report(
            miette::miette!("cannot read randomness: {e}"),
            exit::NODE_FAILED,
        )
    })?;
    write_private(&path, &key.to_text()).map_err(|e| {
        Failure::Report(
            miette::miette!("cannot write `{}`: {e}", path.display()),
            exit::NODE_FAILED,
        )
    })?;
    println!(
        "wrote the secret key of `{name}` to {} (keep it secret)",
        path.display()
    );
    println!(
        "sign with it: vitgraph push --sign {} (or VITGRAPH_SIGNING_KEY)",
        path.display()
    );
    println!(
        "trust it in a workspace's vitgraph.ron: trusted_keys: {{\"{name}\": \"{}\"}}",
        key.public()
    );
    Ok(exit::SUCCESS)
}

/// Writes a new file readable and writable by its owner alone.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// The key a command signs with: `--sign FILE`, else `VITGRAPH_SIGNING_KEY`.
pub(super) fn signing_key(flag: Option<&Path>) -> Result<Option<SecretKey>, Failure> {
    let path = match flag {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os("VITGRAPH_SIGNING_KEY") {
            Some(p) if !p.is_empty() => PathBuf::from(p),
            _ => return Ok(None),
        },
    };
    SecretKey::read(&path).map(Some).map_err(|m| {
        usage(
            m,
            "give the file `vitgraph key generate NAME` wrote (`--sign FILE` or `VITGRAPH_SIGNING_KEY`)",
        )
    })
}

/// What the workspace trusts, from `vitgraph.ron`.
pub(super) fn trust(ws: &Workspace) -> Result<Trust, Failure> {
    let file = crate::pipeline::load_settings(&ws.root)?;
    let mut trust = Trust {
        require: file.require_signed,
        ..Trust::default()
    };
    for (name, public) in &file.trusted_keys {
        let ok = public
            .strip_prefix("ed25519:")
            .is_some_and(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()));
        if !ok {
            return Err(usage(
                format!("`trusted_keys` in `vitgraph.ron`: `{name}` is `{public}`, not a public key"),
                "a public key reads `ed25519:` and 64 hex digits, as `vitgraph key generate` prints it",
            ));
        }
        trust.keys.insert(public.to_ascii_lowercase(), name.clone());
    }
    Ok(trust)
}
