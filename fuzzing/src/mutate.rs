//! A small seeded byte-level mutator for the stable-toolchain bounded run: no coverage
//! feedback (that is libFuzzer's job in `../fuzz`), but the same mutations a coverage-guided
//! fuzzer starts from, applied to inputs from real clients, reach deep into the decoders.

/// xorshift64*: deterministic for a seed, no dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Zero is xorshift's one fixed point.
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        // The high bits are the better ones; the modulo bias is irrelevant here.
        usize::try_from((self.next_u64() >> 16) % (n.max(1) as u64)).unwrap_or(0)
    }

    fn byte(&mut self) -> u8 {
        self.next_u64().to_le_bytes()[7]
    }
}

/// Values at the edges of the lengths, counts and sizes decoders check: as 1, 2, 4 and 8
/// big-endian bytes, and as unsigned varints.
const INTERESTING: [i64; 16] = [
    0,
    1,
    -1,
    2,
    16,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0x8000,
    0xffff,
    0x7fff_ffff,
    -0x8000_0000,
    0x1000_0000,
    i64::MAX,
    i64::MIN,
];

/// Mutates `input` in place with one to four mutations; `other` is a second input to
/// splice from. The result is at most `max_len` bytes.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8], max_len: usize) {
    for _ in 0..1 + rng.below(4) {
        mutate_once(rng, input, other);
    }
    input.truncate(max_len);
}

fn mutate_once(rng: &mut Rng, input: &mut Vec<u8>, other: &[u8]) {
    let len = input.len();
    match rng.below(11) {
        // Flip one bit.
        0 if len > 0 => {
            let at = rng.below(len);
            input[at] ^= 1 << rng.below(8);
        }
        // Set a byte.
        1 if len > 0 => {
            let at = rng.below(len);
            input[at] = rng.byte();
        }
        // Nudge a byte up or down (lengths off by one).
        2 if len > 0 => {
            let at = rng.below(len);
            input[at] = if rng.below(2) == 0 {
                input[at].wrapping_add(1)
            } else {
                input[at].wrapping_sub(1)
            };
        }
        // Insert random bytes.
        3 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.byte()).collect();
            input.splice(at..at, bytes);
        }
        // Delete a range.
        4 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(64));
            input.drain(at..at + n);
        }
        // Duplicate a range (repeated records, fields, tokens).
        5 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(256));
            let copy = input[at..at + n].to_vec();
            let to = rng.below(len + 1);
            input.splice(to..to, copy);
        }
        // Overwrite with an interesting integer.
        6 | 7 if len > 0 => {
            let value = INTERESTING[rng.below(INTERESTING.len())];
            let width = [1usize, 2, 4, 8][rng.below(4)];
            let bytes = &value.to_be_bytes()[8 - width..];
            let at = rng.below(len);
            let end = (at + width).min(len);
            input[at..end].copy_from_slice(&bytes[..end - at]);
        }
        // Overwrite with an unsigned varint (compact lengths and counts).
        8 if len > 0 => {
            let mut value = u64::from(INTERESTING[rng.below(INTERESTING.len())] as u32);
            let mut varint = Vec::new();
            loop {
                let low = (value & 0x7f) as u8;
                value >>= 7;
                if value == 0 {
                    varint.push(low);
                    break;
                }
                varint.push(low | 0x80);
            }
            let at = rng.below(len);
            let end = (at + varint.len()).min(len);
            input.splice(at..end, varint);
        }
        // Splice in a range of the other input.
        9 if !other.is_empty() => {
            let from = rng.below(other.len());
            let n = 1 + rng.below((other.len() - from).min(512));
            let at = rng.below(len + 1);
            let end = (at + rng.below(n + 1)).min(len);
            input.splice(at..end, other[from..from + n].iter().copied());
        }
        // Truncate.
        10 if len > 0 => input.truncate(rng.below(len)),
        _ => input.push(rng.byte()),
    }
}
