//! Deterministic content: the byte at offset `o` of object `name` is a fixed function of both,
//! so every test can check every byte it reads without keeping a copy.

use std::io::{self, Write};
use std::path::Path;

/// The seed of an object's content: FNV-1a over its name.
pub fn seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One 64-bit word of content (splitmix64 of seed and word index).
fn word(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The byte at `offset` of object `name`.
pub fn byte(name: &str, offset: u64) -> u8 {
    byte_of(seed(name), offset)
}

fn byte_of(seed: u64, offset: u64) -> u8 {
    (word(seed, offset / 8) >> (8 * (offset % 8))) as u8
}

/// Fills `out` with the content of `name` starting at `offset`.
pub fn fill(name: &str, offset: u64, out: &mut [u8]) {
    let s = seed(name);
    let mut pos = offset;
    let mut i = 0;
    // Unaligned head byte by byte, then whole words.
    while i < out.len() && !pos.is_multiple_of(8) {
        out[i] = byte_of(s, pos);
        i += 1;
        pos += 1;
    }
    while out.len() - i >= 8 {
        out[i..i + 8].copy_from_slice(&word(s, pos / 8).to_le_bytes());
        i += 8;
        pos += 8;
    }
    while i < out.len() {
        out[i] = byte_of(s, pos);
        i += 1;
        pos += 1;
    }
}

/// The content of `name` in `[offset, offset + len)`.
pub fn bytes(name: &str, offset: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(name, offset, &mut v);
    v
}

/// Checks `data` against the content of `name` at `offset`; on a mismatch, says where.
pub fn check(name: &str, offset: u64, data: &[u8]) -> Result<(), String> {
    let expected = bytes(name, offset, data.len());
    match data.iter().zip(&expected).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{name}: wrong byte at offset {}: got {:#04x}, expected {:#04x}",
            offset + i as u64,
            data[i],
            expected[i]
        )),
    }
}

/// Writes `len` bytes of the content of `name` to the file at `path`.
pub fn write_file(path: &Path, name: &str, len: u64) -> io::Result<()> {
    let mut f = io::BufWriter::new(std::fs::File::create(path)?);
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0;
    while pos < len {
        let n = (len - pos).min(buf.len() as u64) as usize;
        fill(name, pos, &mut buf[..n]);
        f.write_all(&buf[..n])?;
        pos += n as u64;
    }
    f.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_matches_byte_at_every_alignment() {
        for start in 0..17u64 {
            let v = bytes("obj", start, 40);
            for (i, b) in v.iter().enumerate() {
                assert_eq!(*b, byte("obj", start + i as u64));
            }
        }
    }

    #[test]
    fn names_and_offsets_differ() {
        assert_ne!(bytes("a", 0, 64), bytes("b", 0, 64));
        assert_ne!(bytes("a", 0, 64), bytes("a", 64, 64));
        assert!(check("a", 3, &bytes("a", 3, 100)).is_ok());
        let mut bad = bytes("a", 3, 100);
        bad[50] ^= 1;
        assert!(check("a", 3, &bad).unwrap_err().contains("offset 53"));
    }
}
