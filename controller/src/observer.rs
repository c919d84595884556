//! A broker-only node (`process.roles=broker`) follows the committed metadata log as a quorum
//! observer (KRaft's model): it is no voter; it asks a voter's CONTROLLER listener for the
//! committed image with a private request, FetchMetadata (API key [`FETCH_METADATA_KEY`],
//! never advertised, like the voters' message key 32000 of `net::peer`), every
//! [`OBSERVER_POLL`], and publishes what it gets through the node's `ClusterLink` exactly as
//! a voter publishes its own applied image, so the shards need no change.
//!
//! The exchange (version 0; a Kafka request header v1 with a null client id, a v0 response
//! header):
//! - request body: `from_index` (i64): the index the observer has applied (0: none).
//! - response body: `error_code` (i16), `leader_id` (i32, -1: none known), `applied` (i64:
//!   the voter's applied index), `records` (i32 length, -1 when `applied <= from_index`:
//!   nothing new; else the whole image as metadata record frames, `metadata::records`, each
//!   frame's offset the image's offset, as the state machine's snapshot).
//!
//! A first version bounded by the image's size: the whole image every time it changed, never
//! a suffix of the log. Any voter answers from its own applied state (a follower may lag the
//! leader by a heartbeat); the observer never goes back to an older index. The answer names
//! the voter's view of the leader, which the observer publishes for its broker agent and for
//! the shards' forwarding.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use metadata::cluster::ClusterLink;
use metadata::image::Image;
use metadata::records::{decode_entry, encode_frame};

use crate::state_machine::decode_batch;

/// FetchMetadata's private API key on the CONTROLLER listener.
pub const FETCH_METADATA_KEY: i16 = 32_001;
pub const FETCH_METADATA_VERSION: i16 = 0;
/// How often the observer asks for the committed image.
pub const OBSERVER_POLL: Duration = Duration::from_millis(100);
/// One FetchMetadata exchange at most (connect, request, response).
pub const OBSERVER_FETCH_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest image a voter sends (its records' bytes); above it the voter answers
/// [`IMAGE_TOO_LARGE`] and the observer logs it. Below `net::peer::MAX_PEER_FRAME`.
pub const MAX_FETCH_IMAGE_BYTES: usize = 64 << 20;
/// error_code of an answer whose image exceeds [`MAX_FETCH_IMAGE_BYTES`]
/// (Kafka's RECORD_LIST_TOO_LARGE).
pub const IMAGE_TOO_LARGE: i16 = 18;

const REQUEST_HEADER_LEN: usize = 2 + 2 + 4 + 2; // key, version, correlation id, null client id

/// What a voter answers.
#[derive(Clone, Debug, PartialEq)]
pub struct FetchAnswer {
    pub error_code: i16,
    pub leader: Option<i32>,
    pub applied: u64,
    /// The whole image when newer than the request's `from_index`.
    pub image: Option<Arc<Image>>,
}

/// The request frame, size prefix included.
pub fn encode_request(correlation_id: i32, from_index: u64) -> Vec<u8> {
    let mut frame = Vec::with_capacity(4 + REQUEST_HEADER_LEN + 8);
    frame.extend_from_slice(&((REQUEST_HEADER_LEN + 8) as i32).to_be_bytes());
    frame.extend_from_slice(&FETCH_METADATA_KEY.to_be_bytes());
    frame.extend_from_slice(&FETCH_METADATA_VERSION.to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes());
    frame.extend_from_slice(&i64::try_from(from_index).unwrap_or(i64::MAX).to_be_bytes());
    frame
}

/// Whether a request frame (no size prefix) is a FetchMetadata.
pub fn is_fetch_request(frame: &[u8]) -> bool {
    frame.len() >= 2 && i16::from_be_bytes([frame[0], frame[1]]) == FETCH_METADATA_KEY
}

/// The correlation id and `from_index` of a request frame (no size prefix).
pub fn decode_request(frame: &[u8]) -> Result<(i32, u64), String> {
    if frame.len() != REQUEST_HEADER_LEN + 8 {
        return Err(format!("FetchMetadata of {} bytes", frame.len()));
    }
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    if version != FETCH_METADATA_VERSION {
        return Err(format!("FetchMetadata version {version}"));
    }
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let mut from = [0u8; 8];
    from.copy_from_slice(&frame[REQUEST_HEADER_LEN..]);
    let from = i64::from_be_bytes(from);
    let from = u64::try_from(from).map_err(|_| format!("FetchMetadata from index {from}"))?;
    Ok((correlation_id, from))
}

/// The response frame, size prefix included: the image when `applied > from_index`.
pub fn encode_response(
    correlation_id: i32,
    from_index: u64,
    leader: Option<u64>,
    applied: u64,
    image: &Image,
) -> Vec<u8> {
    let mut records = None;
    let mut error_code = 0i16;
    if applied > from_index {
        let mut data = Vec::new();
        let offset = image.offset.unwrap_or(0);
        for record in image.to_records() {
            encode_frame(offset, 0, &record, &mut data);
            if data.len() > MAX_FETCH_IMAGE_BYTES {
                error_code = IMAGE_TOO_LARGE;
                break;
            }
        }
        if error_code == 0 {
            records = Some(data);
        }
    }
    let leader = leader
        .and_then(|id| i32::try_from(id).ok())
        .unwrap_or(metadata::cluster::NO_LEADER);
    let body_len = 4 + 2 + 4 + 8 + 4 + records.as_ref().map_or(0, Vec::len);
    let mut frame = Vec::with_capacity(4 + body_len);
    frame.extend_from_slice(&(body_len as i32).to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    frame.extend_from_slice(&error_code.to_be_bytes());
    frame.extend_from_slice(&leader.to_be_bytes());
    frame.extend_from_slice(&i64::try_from(applied).unwrap_or(i64::MAX).to_be_bytes());
    match &records {
        Some(data) => {
            frame.extend_from_slice(&(data.len() as i32).to_be_bytes());
            frame.extend_from_slice(data);
        }
        None => frame.extend_from_slice(&(-1i32).to_be_bytes()),
    }
    frame
}

/// A response (after its size field) to the request of `correlation_id`.
pub fn decode_response(body: &[u8], correlation_id: i32) -> Result<FetchAnswer, String> {
    const FIXED: usize = 4 + 2 + 4 + 8 + 4;
    if body.len() < FIXED {
        return Err(format!("FetchMetadata response of {} bytes", body.len()));
    }
    let int = |at: usize| i32::from_be_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
    if int(0) != correlation_id {
        return Err(format!(
            "FetchMetadata response to correlation id {}, not {correlation_id}",
            int(0)
        ));
    }
    let error_code = i16::from_be_bytes([body[4], body[5]]);
    let leader = Some(int(6)).filter(|&id| id >= 0);
    let mut applied = [0u8; 8];
    applied.copy_from_slice(&body[10..18]);
    let applied = u64::try_from(i64::from_be_bytes(applied))
        .map_err(|_| "negative applied index".to_string())?;
    let len = int(18);
    let rest = &body[FIXED..];
    let image = match usize::try_from(len) {
        Err(_) if len == -1 && rest.is_empty() => None,
        Ok(len) if len == rest.len() && len <= MAX_FETCH_IMAGE_BYTES => {
            let records = decode_batch(rest).map_err(|error| error.to_string())?;
            let mut image = Image::from_records(&records);
            image.offset = decode_entry(rest).ok().map(|(entry, _)| entry.offset);
            Some(Arc::new(image))
        }
        _ => {
            return Err(format!(
                "FetchMetadata records of {len} bytes, {} sent",
                rest.len()
            ))
        }
    };
    Ok(FetchAnswer {
        error_code,
        leader,
        applied,
        image,
    })
}

/// Follows the committed image until `stop`: asks the known leader (else the voters in turn)
/// every `OBSERVER_POLL` and publishes what is newer through `link`.
pub async fn run(link: Arc<ClusterLink>, stop: Rc<Cell<bool>>) {
    let voters: Vec<(i32, std::net::SocketAddr)> =
        link.voters.iter().map(|(&id, &addr)| (id, addr)).collect();
    if voters.is_empty() {
        tracing::error!("a broker-only node needs controller.quorum.voters to follow; none");
        return;
    }
    let mut next_voter = 0usize;
    let mut correlation_id: i32 = 0;
    let mut applied: u64 = 0;
    let mut failures: u64 = 0;
    while !stop.get() {
        let addr = match link.leader().and_then(|id| link.voters.get(&id).copied()) {
            Some(addr) if failures == 0 => addr,
            _ => {
                next_voter = (next_voter + 1) % voters.len();
                voters[next_voter].1
            }
        };
        correlation_id = correlation_id.wrapping_add(1);
        let request = encode_request(correlation_id, applied);
        let outcome = net::peer::round_trip(addr, &request, OBSERVER_FETCH_TIMEOUT)
            .await
            .map_err(|error| error.to_string())
            .and_then(|body| decode_response(&body, correlation_id));
        match outcome {
            Ok(answer) if answer.error_code == 0 => {
                failures = 0;
                let newer = answer.image.filter(|_| answer.applied > applied);
                let image = newer.map(|image| {
                    applied = answer.applied;
                    (image, answer.applied)
                });
                link.publish(image, answer.leader.and_then(|id| u64::try_from(id).ok()));
            }
            Ok(answer) => {
                failures += 1;
                tracing::warn!(%addr, error_code = answer.error_code, "FetchMetadata refused");
            }
            Err(error) => {
                failures += 1;
                tracing::debug!(%addr, %error, "FetchMetadata failed; asking another voter");
            }
        }
        glommio::timer::sleep(OBSERVER_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use metadata::records::MetadataRecord;

    #[test]
    fn fetch_metadata_round_trips() {
        let request = encode_request(7, 42);
        assert!(is_fetch_request(&request[4..]));
        assert_eq!(decode_request(&request[4..]).unwrap(), (7, 42));
        assert!(decode_request(&request[4..10]).is_err());

        let mut image = Image::from_records(&[
            MetadataRecord::Topic {
                name: "a".into(),
                topic_id: [1; 16],
            },
            MetadataRecord::Topic {
                name: "b".into(),
                topic_id: [2; 16],
            },
        ]);
        image.offset = Some(40);
        // Newer than the observer's index: the whole image.
        let response = encode_response(7, 12, Some(2), 43, &image);
        let answer = decode_response(&response[4..], 7).unwrap();
        assert_eq!(answer.leader, Some(2));
        assert_eq!(answer.applied, 43);
        assert_eq!(*answer.image.unwrap(), image);
        // Not newer: no image.
        let response = encode_response(8, 43, None, 43, &image);
        let answer = decode_response(&response[4..], 8).unwrap();
        assert_eq!((answer.leader, answer.image), (None, None));
        // Another correlation id, a truncated or padded body: refused, never a panic.
        assert!(decode_response(&response[4..], 9).is_err());
        let response = encode_response(7, 0, Some(1), 43, &image);
        for cut in 0..response.len() - 4 {
            assert!(decode_response(&response[4..4 + cut], 7).is_err());
        }
        let mut padded = response[4..].to_vec();
        padded.push(0);
        assert!(decode_response(&padded, 7).is_err());
    }
}
