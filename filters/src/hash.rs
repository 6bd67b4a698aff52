//! Stable, dependency-free hashing used for sticky sessions and sampling.
//!
//! The values must not change between releases or processes: a session's
//! cluster is derived from them, so a restart must not move sessions.

/// FNV-1a over `bytes`, finished with [`mix64`] so that short keys that differ
/// in one byte still land far apart.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix64(h)
}

/// SplitMix64 finaliser: a bijective avalanche of 64 bits.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_values() {
        // Pinned: changing these moves every sticky session after an upgrade.
        assert_eq!(hash_bytes(b""), mix64(0xcbf2_9ce4_8422_2325));
        assert_ne!(hash_bytes(b"a"), hash_bytes(b"b"));
        assert_eq!(hash_bytes(b"session-1"), hash_bytes(b"session-1"));
    }
}
