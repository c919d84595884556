//! The Produce request encoding: the request bytes around each batch, which is written from
//! its own buffer rather than copied.

use wire::generated::api::ApiKey;

use super::Job;

/// A part of an encoded Produce request: request bytes in `head`, or a job's batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Piece {
    Head(usize, usize),
    Batch(usize),
}

pub(super) fn put_len(out: &mut Vec<u8>, n: usize, flexible: bool, wide: bool) {
    if flexible {
        wire::varint::write_unsigned_varint(out, (n + 1) as u32);
    } else if wide {
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.extend_from_slice(&(n as i16).to_be_bytes());
    }
}

/// Encodes a Produce request (v3-v11) around the jobs' batch bytes, without copying
/// them: `head` gets every other byte, `pieces` says how to interleave. `jobs` must be
/// grouped by topic.
#[allow(clippy::too_many_arguments)]
pub(super) fn encode_produce(
    head: &mut Vec<u8>,
    pieces: &mut Vec<Piece>,
    version: i16,
    correlation: i32,
    client_id: &str,
    acks: i16,
    timeout_ms: i32,
    jobs: &[Job],
) {
    head.clear();
    pieces.clear();
    let flexible = version >= 9;
    head.extend_from_slice(&[0, 0, 0, 0]); // frame size, patched below
    head.extend_from_slice(&(ApiKey::Produce as i16).to_be_bytes());
    head.extend_from_slice(&version.to_be_bytes());
    head.extend_from_slice(&correlation.to_be_bytes());
    head.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    head.extend_from_slice(client_id.as_bytes());
    if flexible {
        head.push(0); // header tagged fields
    }
    // transactional_id: null
    if flexible {
        head.push(0);
    } else {
        head.extend_from_slice(&(-1i16).to_be_bytes());
    }
    head.extend_from_slice(&acks.to_be_bytes());
    head.extend_from_slice(&timeout_ms.to_be_bytes());
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < jobs.len() {
        let mut j = i + 1;
        while j < jobs.len() && jobs[j].topic == jobs[i].topic {
            j += 1;
        }
        groups.push((i, j));
        i = j;
    }
    put_len(head, groups.len(), flexible, true);
    let mut start = 0;
    let mut total = 0usize;
    for (a, b) in groups {
        let name = jobs[a].topic.as_bytes();
        put_len(head, name.len(), flexible, false);
        head.extend_from_slice(name);
        put_len(head, b - a, flexible, true);
        for (k, job) in jobs[a..b].iter().enumerate() {
            head.extend_from_slice(&job.partition.to_be_bytes());
            put_len(head, job.buf.len(), flexible, true);
            pieces.push(Piece::Head(start, head.len()));
            start = head.len();
            pieces.push(Piece::Batch(a + k));
            total += job.buf.len();
            if flexible {
                head.push(0); // partition tagged fields
            }
        }
        if flexible {
            head.push(0); // topic tagged fields
        }
    }
    if flexible {
        head.push(0); // request tagged fields
    }
    pieces.push(Piece::Head(start, head.len()));
    total += head.len();
    let size = (total - 4) as i32;
    head[..4].copy_from_slice(&size.to_be_bytes());
}
