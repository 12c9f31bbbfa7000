//! What the planner benchmarks share: the four read patterns.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;

/// Offsets of `n` reads of 64 KiB: back to back, every other slot, 1 MiB apart, or random
/// (unsorted, 4 KiB-aligned offsets in an object of n × 256 KiB, splitmix64 with a fixed seed:
/// some reads overlap, most leave gaps).
pub fn offsets(pattern: &str, n: u64) -> Vec<u64> {
    let stride = |s: u64| (0..n).map(|i| i * s).collect();
    match pattern {
        "contiguous" => stride(64 * KIB),
        "alternating" => stride(128 * KIB),
        "sparse" => stride(MIB),
        _ => {
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            (0..n)
                .map(|_| {
                    state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = state;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    z ^= z >> 31;
                    (z % (n * 64)) * 4 * KIB
                })
                .collect()
        }
    }
}
