//! Signed run records: a measuring host or CI signs the runs it exports or
//! pushes (Ed25519), a workspace lists the public keys it trusts, and an
//! import or pull checks every signature and notes who signed what.
//!
//! A signature covers the whole record as carried (node, stage, key, key
//! parts, environment record, outputs, log, times) — also what the key
//! does not cover, such as the host a run was measured on. Keys are hex:
//! a public key reads `ed25519:<64 hex>`; a secret key file holds one line,
//! `vitgraph-ed25519-secret <name> <64 hex>`.

use std::collections::BTreeMap;
use std::path::Path;

use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier as _, VerifyingKey};
use serde::{Deserialize, Serialize};

/// A record's signature, as carried with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RecordSignature {
    /// The name the signer gave its key (its claim; trust comes from the
    /// workspace's list).
    pub signer: String,
    /// `ed25519:<64 hex>`.
    pub public: String,
    /// 128 hex.
    pub signature: String,
}

/// A secret key, to sign with.
pub struct SecretKey {
    pub name: String,
    key: SigningKey,
}

/// Names the key and its public half; never the secret.
impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretKey({}, {})", self.name, self.public())
    }
}

const SECRET_TAG: &str = "vitgraph-ed25519-secret";

impl SecretKey {
    /// A new key from the operating system's randomness.
    pub(crate) fn generate(name: &str) -> std::io::Result<SecretKey> {
        let mut seed = [0u8; 32];
        std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut seed)?;
        Ok(SecretKey {
            name: name.to_owned(),
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// The key file's text.
    pub(crate) fn to_text(&self) -> String {
        format!("{SECRET_TAG} {} {}\n", self.name, hex(&self.key.to_bytes()))
    }

    /// Reads a key file; the error says what is wrong with it.
    pub(crate) fn read(path: &Path) -> Result<SecretKey, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the key file `{}`: {e}", path.display()))?;
        let mut words = text.split_whitespace();
        match (
            words.next(),
            words.next(),
            words.next().and_then(unhex::<32>),
            words.next(),
        ) {
            (Some(SECRET_TAG), Some(name), Some(bytes), None) => Ok(SecretKey {
                name: name.to_owned(),
                key: SigningKey::from_bytes(&bytes),
            }),
            _ => Err(format!(
                "`{}` is not a vitgraph secret key (`vitgraph key generate NAME` writes one)",
                path.display()
            )),
        }
    }

    /// `ed25519:<64 hex>`.
    pub(crate) fn public(&self) -> String {
        public_text(&self.key.verifying_key())
    }

    /// Signs `message`.
    pub(crate) fn sign(&self, message: &[u8]) -> RecordSignature {
        RecordSignature {
            signer: self.name.clone(),
            public: self.public(),
            signature: hex(&self.key.sign(message).to_bytes()),
        }
    }
}

fn public_text(key: &VerifyingKey) -> String {
    format!("ed25519:{}", hex(key.as_bytes()))
}

/// Whether `sig` signs `message` with the key it names.
pub(crate) fn verifies(sig: &RecordSignature, message: &[u8]) -> bool {
    let key = sig
        .public
        .strip_prefix("ed25519:")
        .and_then(unhex::<32>)
        .and_then(|b| VerifyingKey::from_bytes(&b).ok());
    let signature = unhex::<64>(&sig.signature).map(|b| Signature::from_bytes(&b));
    match (key, signature) {
        (Some(key), Some(signature)) => key.verify(message, &signature).is_ok(),
        _ => false,
    }
}

/// What a workspace trusts: public keys by name, and whether every record
/// that arrives must be signed by one of them.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// `ed25519:<hex>` → the workspace's name for it.
    pub keys: BTreeMap<String, String>,
    pub require: bool,
}

impl Trust {
    /// Who signed, as this workspace names them: the trusted key's name,
    /// or `untrusted key ed25519:1a2b3c4d…` (its claimed name in quotes).
    pub(crate) fn signer(&self, sig: &RecordSignature) -> (String, bool) {
        match self.keys.get(&sig.public) {
            Some(name) => (name.clone(), true),
            None => (
                format!(
                    "untrusted key {}… (calls itself \"{}\")",
                    &sig.public[..sig.public.len().min(16)],
                    sig.signer
                ),
                false,
            ),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    if text.len() != 2 * N || !text.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_its_message_and_key() {
        let a = SecretKey::generate("a").unwrap();
        let b = SecretKey::generate("b").unwrap();
        let sig = a.sign(b"run 1");
        assert!(verifies(&sig, b"run 1"));
        assert!(!verifies(&sig, b"run 2"));
        let mut forged = sig.clone();
        forged.public = b.public();
        assert!(!verifies(&forged, b"run 1"));
        let mut garbled = sig;
        garbled.signature.replace_range(0..2, "zz");
        assert!(!verifies(&garbled, b"run 1"));
    }

    #[test]
    fn a_key_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let key = SecretKey::generate("ci").unwrap();
        let path = dir.path().join("ci.key");
        std::fs::write(&path, key.to_text()).unwrap();
        let back = SecretKey::read(&path).unwrap();
        assert_eq!(back.name, "ci");
        assert_eq!(back.public(), key.public());
        std::fs::write(&path, "not a key").unwrap();
        assert!(SecretKey::read(&path)
            .unwrap_err()
            .contains("not a vitgraph secret key"));
    }
}
