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
        s.serialize_str(blake3::Hash::from(self.0).to_hex().as_str())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ContentHash, D::Error> {
        struct Hex;
        impl serde::de::Visitor<'_> for Hex {
            type Value = ContentHash;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a blake3 hex digest")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<ContentHash, E> {
                ContentHash::from_hex(s).ok_or_else(|| E::custom("invalid blake3 hex digest"))
            }
        }
        d.deserialize_str(Hex)
    }
}
