//! Content hashes: blake3 digests, printed as lowercase hex.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A blake3 digest of some content (a file, a canonical key encoding, a manifest).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    pub fn of_bytes(bytes: &[u8]) -> ContentHash {
        ContentHash(*blake3::hash(bytes).as_bytes())
    }

    pub fn to_hex(&self) -> String {
        blake3::Hash::from(self.0).to_hex().to_string()
    }

    pub fn from_hex(hex: &str) -> Option<ContentHash> {
        blake3::Hash::from_hex(hex)
            .ok()
            .map(|h| ContentHash(*h.as_bytes()))
    }

    /// The first 12 hex digits, for humans.
    pub fn short(&self) -> String {
        self.to_hex()[..12].to_string()
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", self.short())
    }
}

impl Serialize for ContentHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ContentHash, D::Error> {
        let s = String::deserialize(d)?;
        ContentHash::from_hex(&s)
            .ok_or_else(|| serde::de::Error::custom("invalid blake3 hex digest"))
    }
}
