//! Raft `Message`s to and from bytes for the transport between voters: raft's own protobuf
//! encoding (rust-protobuf 2, raft's default codec; no `protoc` needed).
//!
//! Decoding is of untrusted bytes: the length is checked against `MAX_MESSAGE_BYTES` before
//! parsing, and every malformation is a typed error (the parser checks each length against
//! the bytes left; `codec_never_panics_on_garbage` throws random and mutated bytes at it).

use protobuf::Message as _;
use raft::eraftpb::Message;

use crate::log_store::MAX_FRAME_PAYLOAD_BYTES;
use crate::node::DEFAULT_MAX_BYTES_PER_MSG;

/// The largest encoded message: a snapshot (MsgSnapshot) or one append's entries, with room
/// for the fields around them.
pub const MAX_MESSAGE_BYTES: usize = MAX_FRAME_PAYLOAD_BYTES + DEFAULT_MAX_BYTES_PER_MSG as usize;

#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("raft message of {bytes} bytes, over the {max} byte bound")]
    TooLarge { bytes: usize, max: usize },
    #[error("malformed raft message: {0}")]
    Malformed(String),
}

pub fn encode(msg: &Message) -> Result<Vec<u8>, CodecError> {
    let bytes = msg.compute_size() as usize;
    if bytes > MAX_MESSAGE_BYTES {
        return Err(CodecError::TooLarge {
            bytes,
            max: MAX_MESSAGE_BYTES,
        });
    }
    msg.write_to_bytes()
        .map_err(|e| CodecError::Malformed(e.to_string()))
}

pub fn decode(bytes: &[u8]) -> Result<Message, CodecError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(CodecError::TooLarge {
            bytes: bytes.len(),
            max: MAX_MESSAGE_BYTES,
        });
    }
    Message::parse_from_bytes(bytes).map_err(|e| CodecError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use raft::eraftpb::{Entry, MessageType, Snapshot};

    fn sample() -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.to = 2;
        m.from = 1;
        m.term = 7;
        m.log_term = 6;
        m.index = 41;
        m.commit = 40;
        for i in 0..3u64 {
            let e = Entry {
                index: 42 + i,
                term: 7,
                data: vec![i as u8; 10 + i as usize].into(),
                ..Default::default()
            };
            m.mut_entries().push(e);
        }
        let mut s = Snapshot::default();
        s.mut_metadata().index = 30;
        s.mut_metadata().term = 5;
        s.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        s.data = b"image".to_vec().into();
        m.set_snapshot(s);
        m
    }

    #[test]
    fn round_trip() {
        let m = sample();
        let bytes = encode(&m).unwrap();
        assert_eq!(decode(&bytes).unwrap(), m);
    }

    #[test]
    fn too_large_is_refused_before_parsing() {
        let big = vec![0u8; MAX_MESSAGE_BYTES + 1];
        assert!(matches!(decode(&big), Err(CodecError::TooLarge { .. })));
    }

    /// Random bytes, and valid messages with bytes flipped, truncated or extended: decoding
    /// returns a message or a typed error, never panics.
    #[test]
    fn codec_never_panics_on_garbage() {
        let mut x: u64 = 0x1234_5678;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let valid = encode(&sample()).unwrap();
        let (mut ok, mut err) = (0, 0);
        for round in 0..20_000 {
            let bytes: Vec<u8> = if round % 2 == 0 {
                let len = (next() % 200) as usize;
                (0..len).map(|_| next() as u8).collect()
            } else {
                let mut b = valid.clone();
                for _ in 0..1 + next() % 4 {
                    let i = (next() as usize) % b.len();
                    b[i] = next() as u8;
                }
                match next() % 3 {
                    0 => b.truncate((next() as usize) % b.len()),
                    1 => b.extend((0..next() % 16).map(|_| next() as u8)),
                    _ => {}
                }
                b
            };
            match decode(&bytes) {
                Ok(_) => ok += 1,
                Err(CodecError::Malformed(_)) => err += 1,
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert!(ok > 0 && err > 0, "{ok} {err}");
    }
}
