//! A hash map for integer ids (StringIds ids, correlation ids, processes).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map keyed by integer ids. The default SipHash is built to resist
/// adversarial keys, which trace ids are not; a multiply-rotate hash (as in
/// rustc's FxHash) makes indexing a million runtime calls several times faster.
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    fn write_i64(&mut self, v: i64) {
        self.add(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl IdHasher {
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
