//! One client connection on the shard that accepted it: read frames, decode headers, run each
//! request as its own task, and write the responses in request order (Kafka's clients match
//! responses to requests by order as well as by correlation id).
//!
//! Reads go straight into the buffer that becomes the frame: once a frame's size is known the
//! buffer is grown to hold all of it before the body is read, so the body is read from the
//! socket exactly once and then sliced (`Bytes`) into the request's fields. The only bytes
//! ever moved are those of a frame that straddles the end of a read and did not fit the
//! buffer's capacity (at most one read's worth), when the buffer grows.
//!
//! Bounds: a frame above `socket.request.max.bytes` is refused from its 4-byte size, before
//! anything is allocated; at most `MAX_IN_FLIGHT` requests per connection are being processed
//! (Kafka's clients pipeline up to 5), after which reading pauses.

use std::rc::Rc;

use bytes::{Buf, BytesMut};
use futures::io::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel;
use glommio::net::TcpStream;
use glommio::Task;
use wire::frame;

use crate::handlers;
use crate::shard::Shard;

/// Requests of one connection processed at the same time before reading pauses.
const MAX_IN_FLIGHT: usize = 64;

/// Bytes asked of each socket read when no larger frame is pending.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Serves one connection until the peer closes it or sends something we must refuse.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream) {
    let peer = stream.peer_addr().map(|addr| addr.to_string()).unwrap_or_else(|_| "unknown".into());
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer) = stream.split();
    let (responses, pending) = local_channel::new_bounded::<Task<handlers::Response>>(MAX_IN_FLIGHT);
    let writer_peer = peer.clone();
    let writer_task = glommio::spawn_local(async move {
        while let Some(task) = pending.recv().await {
            match task.await {
                Ok(Some(response)) => {
                    if writer.write_all(&response).await.is_err() {
                        break;
                    }
                }
                Ok(None) => {}
                Err(reason) => {
                    tracing::error!(peer = %writer_peer, %reason, "closing connection");
                    break;
                }
            }
        }
        let _ = writer.close().await;
    });
    let max_frame = shard.config.socket_request_max_bytes as usize;
    let mut buffer = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let reason: String = 'read: loop {
        // Hand out every whole frame already in the buffer.
        loop {
            match frame::frame_body_len(&buffer, max_frame) {
                Err(error) => break 'read format!("refused frame: {error}"),
                Ok(None) => break,
                Ok(Some(body_len)) => {
                    let mut request = buffer.split_to(frame::FRAME_HEADER_BYTES + body_len).freeze();
                    request.advance(frame::FRAME_HEADER_BYTES);
                    crate::shard::Stats::bump(&shard.stats.requests);
                    match handlers::dispatch(&shard, request) {
                        Ok(task) => {
                            if responses.send(task).await.is_err() {
                                break 'read "response writer stopped".into();
                            }
                        }
                        Err(reason) => break 'read reason,
                    }
                }
            }
        }
        // Make room for the rest of the current frame (or the next read) and read.
        let frame_bytes = match frame::peek_frame_size(&buffer, max_frame) {
            Ok(Some(body_len)) => frame::FRAME_HEADER_BYTES + body_len,
            Ok(None) => 0,
            Err(error) => break 'read format!("refused frame: {error}"),
        };
        let want = frame_bytes.saturating_sub(buffer.len()).max(READ_CHUNK_BYTES);
        buffer.reserve(want);
        let spare = buffer.spare_capacity_mut();
        // SAFETY: the slice covers the buffer's spare capacity, which is allocated; `read`
        // only writes into it (socket bytes) and reports how many bytes it wrote, and only
        // those are exposed (`set_len` below). Zero-filling instead would cost a memset of
        // every byte received, a measurable share of the CPU per GiB.
        let target = unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<u8>(), spare.len()) };
        match reader.read(target).await {
            Ok(0) => {
                if buffer.is_empty() {
                    break 'read String::new();
                }
                break 'read format!("peer closed in the middle of a frame ({} bytes pending)", buffer.len());
            }
            Ok(read) => {
                // SAFETY: `read` bytes past the old length were just written by the socket read.
                unsafe { buffer.set_len(buffer.len() + read) };
            }
            Err(error) => break 'read format!("read failed: {error}"),
        }
    };
    if !reason.is_empty() {
        tracing::warn!(peer = %peer, reason = %reason, "closing connection");
    }
    drop(responses);
    // Responses already being computed are still written, then the writer closes the socket.
    writer_task.await;
}
