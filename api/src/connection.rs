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
//! Bounds (see `limits`): a frame above `socket.request.max.bytes` is refused from its 4-byte
//! size, before anything is allocated; at most `queued.max.requests` requests of a connection
//! are read and not yet answered (of them `limits::MAX_IN_PROCESS` being processed, one
//! fetch at a time), and reading pauses while the connection holds
//! `limits::MAX_CONNECTION_PENDING_BYTES` or its shard `queued.max.request.bytes` (requests
//! read plus responses not yet written), so a client that never reads its responses stops
//! being read. A connection with no bytes read or written for `connections.max.idle.ms` is
//! closed.
//!
//! Ending: when the peer closes (or resets) the connection, every request still in process is
//! cancelled at once (dropping a glommio `Task` cancels it): a parked long poll lets go of its
//! partitions, and one parked on another shard is cancelled there over the mesh. A request
//! refused for its content closes the connection after the responses already computed are
//! written (for at most [`CLOSE_DRAIN_TIMEOUT`]).

use std::cell::Cell;
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use futures::future::Either;
use futures::FutureExt;
use glommio::channels::local_channel;
use glommio::Task;
use wire::frame;

use crate::authentication::{Admission, Session};
use crate::handlers;
use crate::handoff::{Moved, Tally};
use crate::limits::{ConnectionLoad, ConnectionSlot, Held, HeldResponse, Outcome, ShardBudget};
use crate::shard::{Shard, Stats};
use crate::transport::{Reader, Transport};

const FETCH_API_KEY: i16 = wire::generated::api::ApiKey::Fetch as i16;
const PRODUCE_API_KEY: i16 = wire::generated::api::ApiKey::Produce as i16;

/// Bytes asked of each socket read when no larger frame is pending.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// The most bytes one socket read is offered (`ReadRoom`): a frame that says it is large is
/// read in slices of this, so the buffer's memory is zeroed (and committed) as its bytes
/// come, not all at once on the say-so of a 4-byte size (100 MiB by default). A recv
/// rarely returns more at once, and one more syscall per MiB is noise beside copying it.
const READ_SLICE_BYTES_MAX: usize = 1024 * 1024;

/// While a connection is not reading (at one of its bounds), how often it looks whether the
/// peer has gone (a closed socket cannot wake a task that is not reading it) and whether it
/// has been idle too long.
const PEER_CHECK_INTERVAL: Duration = Duration::from_millis(200);

/// After a refused request, how long the responses already being computed may take to be
/// After the peer's orderly close, how long answers already being computed may still be
/// written before the rest is cancelled (well under the 1 s in which a closed long poll must
/// let go of its connection).
const HALF_CLOSE_DRAIN_TIMEOUT: Duration = Duration::from_millis(200);

/// written before the connection closes anyway.
const CLOSE_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a connection ends.
enum End {
    /// The peer closed or reset it: nobody will read what is in process.
    PeerGone(Option<String>),
    /// No bytes read or written for `connections.max.idle.ms`.
    Idle(Duration),
    /// The writer failed (peer gone).
    WriterStopped,
    /// A request we refuse (Kafka closes on what it cannot parse).
    Refused(String),
    /// Quiet, and its requests belong to this other shard: hand it over (see `handoff`).
    Moved(usize),
    /// A request after its SASL session ended (KIP-368): closed unanswered, as Kafka does.
    Expired,
}

/// What the read step brought.
enum ReadOutcome {
    Read(std::io::Result<usize>),
    /// A move was pending and the connection became quiet first.
    Quiet,
}

/// Serves one connection until the peer closes it, it idles out, or it sends something we
/// must refuse. `slot` is its place under `max.connections`, freed when this returns.
///
/// `transport` carries the bytes (plain TCP, or TLS set up before this is called): this
/// module only sees its reader and writer. `unread`: bytes already read from its socket
/// (after SASL authentication, the requests that followed the last authentication message).
/// `sasl`: the session of a connection that authenticated.
pub async fn serve(
    shard: Rc<Shard>,
    transport: Transport,
    budget: Rc<ShardBudget>,
    slot: ConnectionSlot,
    unread: BytesMut,
    sasl: Option<Session>,
) {
    let sasl = sasl.map(Rc::new);
    serve_from(shard, transport, budget, slot, unread, true, sasl).await;
}

/// Serves a connection another shard handed over (see `handoff`): the socket, and the bytes
/// that shard had read but not handed out, which come first.
pub async fn adopt(shard: Rc<Shard>, moved: Moved) {
    let Moved {
        fd,
        unread,
        peer,
        listener,
        principal,
        slot,
    } = moved;
    // SAFETY: `fd` is a connected TCP socket that `moved` owned alone; the stream owns it now.
    let stream = unsafe { glommio::net::TcpStream::from_raw_fd(fd.into_raw_fd()) };
    let mut transport = Transport::plain(stream).on_listener(&listener);
    transport.peer = peer;
    transport.principal = Rc::from(principal);
    let budget = shard.handoff.budget(&shard.config);
    let mut buffer = BytesMut::with_capacity(READ_CHUNK_BYTES.max(unread.len()));
    buffer.extend_from_slice(&unread);
    // Only sessions that never end move (see `serve_from`): nothing of it is left to keep.
    serve_from(shard, transport, budget, slot, buffer, false, None).await;
}

/// Serves a connection whose first bytes (already read from its socket) are `buffer`;
/// `fresh`: just accepted (it may move at once), rather than just moved here.
async fn serve_from(
    shard: Rc<Shard>,
    transport: Transport,
    budget: Rc<ShardBudget>,
    slot: ConnectionSlot,
    mut buffer: BytesMut,
    fresh: bool,
    sasl: Option<Rc<Session>>,
) {
    // Only plaintext connections move: TLS state stays with the shard that holds it, and so
    // does a SASL session that can end (its expiry and re-authentication).
    let movable = shard.config.connection_handoff_enable
        && matches!(transport.reader, Reader::Plain(_))
        && !sasl.as_ref().is_some_and(|session| session.can_end());
    let tally = Tally::new(shard.id, shard.shard_count(), movable, fresh);
    shard.metrics.connection_opened();
    let Transport {
        mut reader,
        mut writer,
        peer,
        fd,
        listener,
        principal,
    } = transport;
    // ACL hosts are compared with the address as Java prints it, once per connection.
    let host = match peer.parse::<std::net::SocketAddr>() {
        Ok(address) => Rc::from(acl::java_host_address(address.ip())),
        Err(_) => Rc::from(peer.as_str()),
    };
    let origin = handlers::Origin {
        listener,
        principal,
        host,
        tally: tally.clone(),
        muted_until: Default::default(),
        sasl,
    };
    let load = ConnectionLoad::new(budget, shard.config.queued_max_requests as usize);
    // An idle bound beyond any deadline an `Instant` can hold (Long.MAX ms) means never.
    let idle = shard
        .config
        .connections_max_idle_ms
        .map(Duration::from_millis)
        .filter(|idle| Instant::now().checked_add(*idle * 2).is_some());
    let activity = Rc::new(Cell::new(Instant::now()));
    // Unbounded as a channel: `load` bounds the requests in it (`queued.max.requests`).
    let (responses, pending) = local_channel::new_unbounded::<Task<Outcome>>();
    let written = activity.clone();
    let writer_peer = peer.clone();
    let writer_shard = shard.clone();
    // Set before a move: the socket goes on elsewhere, so the writer must not shut it down.
    let keep_open = Rc::new(Cell::new(false));
    let writer_keep_open = keep_open.clone();
    let writer_task = glommio::spawn_local(async move {
        let stats = &writer_shard.stats;
        let mut batch = Batch::default();
        let mut next: Option<Task<Outcome>> = None;
        // Whether every response was written (the writer ended because the reader did).
        let mut clean = true;
        loop {
            let task = match next.take() {
                Some(task) => task,
                None => match pending.recv().await {
                    Some(task) => task,
                    None => break,
                },
            };
            let mut stop = batch.take(task.await, &writer_peer);
            // Responses of this connection that are already computed go out with this one
            // (in request order: gathering stops at the first one still in process).
            while !stop && !batch.is_full() {
                let Some(Some(mut task)) = pending.recv().now_or_never() else {
                    break;
                };
                match futures::poll!(&mut task) {
                    Poll::Ready(outcome) => stop = batch.take(outcome, &writer_peer),
                    Poll::Pending => {
                        next = Some(task);
                        break;
                    }
                }
            }
            if !batch.responses.is_empty() {
                let sent = writer.write_frames(&batch.responses, &stats.send).await;
                if let Err(error) = sent {
                    tracing::debug!(peer = %writer_peer, %error, "write failed; closing connection");
                    clean = false;
                    break;
                }
                Stats::add(&stats.response_writes, 1);
                Stats::add(&stats.responses_written, batch.responses.len() as u64);
                written.set(Instant::now());
                // The responses drop here: their bytes (and file ranges) and their requests'
                // places are released.
                batch.responses.clear();
            }
            if stop {
                clean = false;
                break;
            }
        }
        if !(clean && writer_keep_open.get()) {
            writer.close().await;
        }
        clean
    });
    let max_frame = shard.config.socket_request_max_bytes as usize;
    buffer.reserve(READ_CHUNK_BYTES);
    // The bytes in `buffer` (a partial frame), held against the connection's and shard's bounds.
    let mut buffered = load.charge(buffer.len());
    let watch = Watch {
        fd,
        load: &load,
        activity: &activity,
        idle,
    };
    let mut idle_timer: Option<glommio::timer::Timer> = None;
    let mut room = ReadRoom::default();
    // Whether the last read took less than it was offered: the socket was empty then, so a
    // `read_ready` now would most likely find nothing (a wasted `recv`), and glommio's read
    // has already armed its readiness poll.
    let mut drained = false;
    let end: End = 'read: loop {
        // Hand out every whole frame already in the buffer.
        loop {
            // A client over its quota: nothing more is read until its throttle has passed
            // (KIP-219; its response went out already). Bounded by `quota::MAX_THROTTLE`.
            if let Some(until) = origin.muted_until.take() {
                let now = Instant::now();
                if until > now {
                    glommio::timer::sleep(until - now).await;
                }
            }
            match frame::frame_body_len(&buffer, max_frame) {
                Err(error) => break 'read End::Refused(format!("refused frame: {error}")),
                Ok(None) => break,
                Ok(Some(body_len)) => {
                    let header = &buffer[frame::FRAME_HEADER_BYTES..];
                    let api_key =
                        (header.len() >= 2).then(|| i16::from_be_bytes([header[0], header[1]]));
                    let fetch = api_key == Some(FETCH_API_KEY);
                    let produce = api_key == Some(PRODUCE_API_KEY);
                    let unread = buffered.bytes();
                    if let Err(end) = watch.wait_until(|| load.may_dispatch(fetch, unread)).await {
                        break 'read end;
                    }
                    let frame_bytes = frame::FRAME_HEADER_BYTES + body_len;
                    let mut request = buffer.split_to(frame_bytes).freeze();
                    request.advance(frame::FRAME_HEADER_BYTES);
                    // Nothing is awaited from here to the dispatch: a SaslHandshake admitted as
                    // a re-authentication is handled before the next request is admitted.
                    if let Some(session) = &origin.sasl {
                        match session.admit(api_key, Instant::now()) {
                            Admission::Serve => {}
                            Admission::Expired => break 'read End::Expired,
                            Admission::Refuse(reason) => break 'read End::Refused(reason),
                        }
                    }
                    let held = Held::new(&load, fetch, buffered.split(frame_bytes));
                    crate::shard::Stats::bump(&shard.stats.requests);
                    match handlers::dispatch(&shard, request, held, &peer, &origin) {
                        Ok(task) => {
                            if responses.send(task).await.is_err() {
                                break 'read End::WriterStopped;
                            }
                            // A failed re-authentication: its answer is written, then close.
                            if let Some(reason) = origin.sasl.as_ref().and_then(|s| s.failure()) {
                                break 'read End::Refused(reason);
                            }
                            if fetch || produce {
                                tally.request();
                            }
                        }
                        Err(reason) => {
                            shard.metrics.refused(api_key);
                            break 'read End::Refused(reason);
                        }
                    }
                }
            }
        }
        // A decided move waits for a quiet point: a frame boundary (here: every whole frame
        // is handed out), nothing in process, every response written.
        if let Some(target) = tally.pending() {
            match quiet_point(&watch, &load, &tally).await {
                Ok(true) => break 'read End::Moved(target),
                Ok(false) => {}
                Err(end) => break 'read end,
            }
        }
        // Back-pressure: hold off reading while this connection or its shard holds too much.
        let unread = buffered.bytes();
        if let Err(end) = watch.wait_until(|| load.may_read(unread)).await {
            break 'read end;
        }
        // Make room for the rest of the current frame (or the next read) and read.
        let frame_bytes = match frame::peek_frame_size(&buffer, max_frame) {
            Ok(Some(body_len)) => frame::FRAME_HEADER_BYTES + body_len,
            Ok(None) => 0,
            Err(error) => break 'read End::Refused(format!("refused frame: {error}")),
        };
        let want = frame_bytes
            .saturating_sub(buffer.len())
            .max(READ_CHUNK_BYTES);
        buffer.reserve(want);
        // Plaintext: what the socket already holds goes straight into the spare capacity,
        // uninitialised (the kernel writes it; no slice is made over it), so the bytes of a
        // busy connection are never zeroed first. Only a read that must wait goes through
        // glommio with an initialised slice (`ReadRoom`).
        let spare = buffer.spare_capacity_mut();
        let ready_len = spare.len().min(READ_SLICE_BYTES_MAX);
        if let Some(outcome) = (!drained)
            .then(|| reader.read_ready(&mut spare[..ready_len]))
            .flatten()
        {
            drained = matches!(outcome, Ok(n) if n < ready_len);
            if let Err(end) = took(outcome, &mut buffer, &mut room, &mut buffered, &activity) {
                break 'read end;
            }
            continue 'read;
        }
        // A read dropped unfinished (idle timer, quiet point) leaves nothing in flight that
        // could write here later: glommio reads on readiness (a plain `recv` once the socket
        // is readable).
        let target = room.readable(&mut buffer, READ_SLICE_BYTES_MAX);
        let offered = target.len();
        // With a move pending (a long poll in process), whichever comes first: bytes, or the
        // quiet point (the read is then dropped; glommio reads on readiness, so nothing of
        // the socket's is consumed).
        let move_pending = tally.pending();
        let reading = &mut reader;
        let load_ref = &load;
        let read = async move {
            let read = reading.read(target);
            if move_pending.is_none() {
                return ReadOutcome::Read(read.await);
            }
            let quiet = until_quiet(load_ref);
            futures::pin_mut!(read, quiet);
            match futures::future::select(read, quiet).await {
                Either::Left((outcome, _)) => ReadOutcome::Read(outcome),
                Either::Right(_) => ReadOutcome::Quiet,
            }
        };
        let outcome = match idle {
            None => read.await,
            Some(idle) => {
                // One timer serves many reads: armed for the idle deadline as it stood, and
                // when it fires the deadline is looked at again (activity since moves it).
                let timer = idle_timer.get_or_insert_with(|| {
                    let deadline = activity.get() + idle;
                    glommio::timer::Timer::new(deadline.saturating_duration_since(Instant::now()))
                });
                futures::pin_mut!(read);
                match futures::future::select(read, timer).await {
                    Either::Left((outcome, _)) => outcome,
                    Either::Right(_) => {
                        idle_timer = None;
                        if activity.get().elapsed() >= idle {
                            break 'read End::Idle(idle);
                        }
                        continue 'read;
                    }
                }
            }
        };
        let outcome = match outcome {
            ReadOutcome::Read(outcome) => outcome,
            ReadOutcome::Quiet => match move_pending {
                Some(target) => break 'read End::Moved(target),
                None => continue 'read,
            },
        };
        drained = matches!(outcome, Ok(n) if n < offered);
        if let Err(end) = took(outcome, &mut buffer, &mut room, &mut buffered, &activity) {
            break 'read end;
        }
    };
    if let End::Moved(_) = end {
        keep_open.set(true);
    }
    shard.metrics.connection_ended(matches!(end, End::Moved(_)));
    drop(responses);
    match end {
        End::PeerGone(None) => {
            // An orderly close (FIN) may be a half-close after the last request: answers that
            // are ready within a short grace are still written, as before; long polls and
            // anything slower are cancelled when it ends.
            let drain = glommio::timer::sleep(HALF_CLOSE_DRAIN_TIMEOUT);
            futures::pin_mut!(drain);
            let _ = futures::future::select(writer_task, drain).await;
        }
        End::PeerGone(reason) => {
            // A client going away (even by reset) is ordinary, not worth a warning.
            if let Some(reason) = reason {
                tracing::debug!(peer = %peer, reason = %reason, "peer gone; closing connection");
            }
            // Nobody will read the answers: cancel every request in process (dropping the
            // writer drops the queued tasks, which cancels them).
            drop(writer_task);
        }
        End::WriterStopped => drop(writer_task),
        End::Expired => {
            tracing::info!(
                peer = %peer,
                principal = %origin.principal,
                "closing connection due to expired credential: its SASL session ended \
                 (connections.max.reauth.ms or the token's expiry) without a re-authentication"
            );
            // As Kafka: responses not yet written are dropped with the connection.
            drop(writer_task);
        }
        End::Idle(idle) => {
            tracing::debug!(peer = %peer, idle_ms = idle.as_millis() as u64, "closing idle connection (connections.max.idle.ms)");
            drop(writer_task);
        }
        End::Moved(target) => {
            // Nothing is queued (the connection was quiet): the writer ends at once, without
            // shutting the socket down unless a response failed.
            if !writer_task.await {
                return;
            }
            let fd = match crate::handoff::duplicate(fd) {
                Ok(fd) => fd,
                Err(error) => {
                    // Cannot move: close as if idle (the client reconnects).
                    tracing::warn!(peer = %peer, %error, "connection handoff failed; closing");
                    return;
                }
            };
            let unread = buffer.split().freeze();
            drop(buffered);
            // Closes this shard's fd (the duplicate keeps the socket); nothing of ours is in
            // flight on it: no read is being awaited and the writer has ended.
            drop(reader);
            let (listener, principal) = (origin.listener.to_string(), origin.principal.to_string());
            shard.hand_off(
                target,
                Moved {
                    fd,
                    unread,
                    peer,
                    listener,
                    principal,
                    slot,
                },
            );
        }
        End::Refused(reason) => {
            tracing::warn!(peer = %peer, reason = %reason, "closing connection");
            let drain = glommio::timer::sleep(CLOSE_DRAIN_TIMEOUT);
            futures::pin_mut!(drain);
            // Responses already being computed are still written, then the writer closes the
            // socket; past the timeout they are cancelled.
            let _ = futures::future::select(writer_task, drain).await;
        }
    }
}

/// Most responses of one connection written together.
const MAX_BATCH_RESPONSES: usize = 64;
/// Most bytes (file ranges included) of responses gathered into one write.
const MAX_BATCH_BYTES: usize = 1 << 20;

/// Responses of one connection gathered for one write, in request order.
#[derive(Default)]
struct Batch {
    responses: Vec<HeldResponse>,
    bytes: usize,
}

impl Batch {
    /// Adds a request's outcome; true when the connection must close after this batch.
    fn take(&mut self, outcome: Outcome, peer: &str) -> bool {
        match outcome {
            Ok(Some(response)) => {
                self.bytes += response.frame.len();
                self.responses.push(response);
                false
            }
            Ok(None) => false,
            Err(reason) => {
                tracing::error!(peer = %peer, %reason, "closing connection");
                true
            }
        }
    }
    fn is_full(&self) -> bool {
        self.responses.len() >= MAX_BATCH_RESPONSES || self.bytes >= MAX_BATCH_BYTES
    }
}

/// Waits for a quiet point before a move: `Ok(true)` once nothing of the connection is in
/// process and every response is written. Reading stops meanwhile, once per move and for at
/// most [`crate::handoff::QUIET_WAIT`], unless a fetch is in process (a long poll may park
/// for seconds); otherwise (`Ok(false)`) the read races the quiet point instead.
async fn quiet_point(watch: &Watch<'_>, load: &ConnectionLoad, tally: &Tally) -> Result<bool, End> {
    if load.requests() == 0 {
        return Ok(true);
    }
    if load.fetches() > 0 || !tally.may_wait() {
        return Ok(false);
    }
    let quiet = watch.wait_until(|| load.requests() == 0);
    let timeout = glommio::timer::sleep(crate::handoff::QUIET_WAIT);
    futures::pin_mut!(quiet, timeout);
    match futures::future::select(quiet, timeout).await {
        Either::Left((Ok(()), _)) => Ok(true),
        Either::Left((Err(end), _)) => Err(end),
        Either::Right(_) => {
            tally.waited();
            Ok(false)
        }
    }
}

/// Resolves once nothing of the connection is in process and every response is written.
async fn until_quiet(load: &ConnectionLoad) {
    loop {
        let released = load.listen();
        if load.requests() == 0 {
            return;
        }
        released.await;
    }
}

/// What a connection that is not reading its socket keeps an eye on.
struct Watch<'a> {
    fd: RawFd,
    load: &'a Rc<ConnectionLoad>,
    activity: &'a Cell<Instant>,
    idle: Option<Duration>,
}

impl Watch<'_> {
    /// Waits until `ready()` holds, or the peer has gone, or the connection idled out.
    async fn wait_until(&self, ready: impl Fn() -> bool) -> Result<(), End> {
        // The common case, checked before any listener is made (each one is an allocation,
        // and this runs twice per request).
        if ready() {
            return Ok(());
        }
        loop {
            let released = self.load.listen();
            if ready() {
                return Ok(());
            }
            let tick = glommio::timer::sleep(PEER_CHECK_INTERVAL);
            futures::pin_mut!(released, tick);
            if let Either::Right(_) = futures::future::select(released, tick).await {
                if let Some(reason) = peer_gone(self.fd) {
                    return Err(End::PeerGone(reason));
                }
                if let Some(idle) = self.idle {
                    if self.activity.get().elapsed() >= idle {
                        return Err(End::Idle(idle));
                    }
                }
            }
        }
    }
}

/// Takes in what one read did, whichever way it read (`read_ready` or a waiting read): the
/// bytes join the buffer and count against the bounds, or the connection ends (`Err`).
fn took(
    outcome: std::io::Result<usize>,
    buffer: &mut BytesMut,
    room: &mut ReadRoom,
    buffered: &mut net::limits::Charge,
    activity: &Cell<Instant>,
) -> Result<(), End> {
    match outcome {
        Ok(0) if buffer.is_empty() => Err(End::PeerGone(None)),
        Ok(0) => Err(End::PeerGone(Some(format!(
            "peer closed in the middle of a frame ({} bytes pending)",
            buffer.len()
        )))),
        Ok(read) => {
            room.filled(buffer, read);
            buffered.grow(read);
            let now = Instant::now();
            activity.set(now);
            crate::busy_poll::note_read(now);
            Ok(())
        }
        Err(error) => Err(End::PeerGone(Some(format!("read failed: {error}")))),
    }
}

/// The part of the read buffer's spare capacity that holds initialised bytes, so that reads
/// may be handed a `&mut [u8]` over it (a slice over uninitialised bytes is undefined
/// behaviour, whatever the read then does). Spare capacity is zeroed once, when it is new
/// (after `reserve` allocated or moved the buffer), not before every read: a read that fills
/// part of it leaves the rest initialised for the next one. Frames split off the front
/// leave the spare capacity where it is.
#[derive(Debug, Default)]
struct ReadRoom {
    /// Address of the first spare byte when last looked at; a different address means the
    /// buffer was reallocated or its bytes moved, and nothing of the spare is known.
    start: usize,
    /// How many bytes from `start` on are initialised.
    initialised_bytes: usize,
}

impl ReadRoom {
    /// The first `max_bytes` (or fewer) of the spare capacity of `buffer`, initialised.
    fn readable<'a>(&mut self, buffer: &'a mut BytesMut, max_bytes: usize) -> &'a mut [u8] {
        let spare = buffer.spare_capacity_mut();
        let start = spare.as_ptr() as usize;
        if start != self.start {
            self.start = start;
            self.initialised_bytes = 0;
        }
        let len = spare.len().min(max_bytes);
        let spare = &mut spare[..len];
        if self.initialised_bytes < len {
            for byte in &mut spare[self.initialised_bytes..] {
                byte.write(0);
            }
            self.initialised_bytes = len;
        }
        // SAFETY: the slice covers the first `len` bytes of the buffer's spare capacity
        // (allocated, and borrowed mutably from `buffer` for 'a), and every byte of it is
        // initialised: the
        // first `initialised_bytes` were written at this same address by an earlier call (the
        // address is unchanged, so the buffer was neither reallocated nor moved, and no byte
        // of the spare has been handed out since: `filled` moves `start` past the bytes it
        // exposes), the rest just above.
        unsafe { std::slice::from_raw_parts_mut(spare.as_mut_ptr().cast::<u8>(), len) }
    }

    /// Exposes the first `read` bytes of the spare capacity, which a read just wrote (into
    /// the slice `readable` gave, or through the kernel's pointer: `read_ready`), as the
    /// buffer's content.
    fn filled(&mut self, buffer: &mut BytesMut, read: usize) {
        assert!(read <= buffer.capacity() - buffer.len());
        // SAFETY: `read` is within the spare capacity (asserted) and its bytes are
        // initialised: the read that reported them wrote every one of them.
        unsafe { buffer.set_len(buffer.len() + read) };
        if buffer.spare_capacity_mut().as_ptr() as usize == self.start + read {
            self.start += read;
            self.initialised_bytes = self.initialised_bytes.saturating_sub(read);
        }
    }
}

/// Whether the peer has closed or reset the socket, looked at without consuming anything
/// (`Some(None)`: orderly close; `Some(Some(reason))`: an error). Bytes still unread hide an
/// orderly close behind them; a peer that closes with our responses unread resets instead,
/// which shows.
fn peer_gone(fd: RawFd) -> Option<Option<String>> {
    let mut byte = 0u8;
    // SAFETY: a non-blocking peek of at most one byte into a local.
    let peeked = unsafe {
        libc::recv(
            fd,
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match peeked {
        0 => Some(None),
        n if n > 0 => None,
        _ => {
            let error = std::io::Error::last_os_error();
            match error.kind() {
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => None,
                _ => Some(Some(format!("socket error: {error}"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_room_zeroes_new_spare_capacity_once() {
        let mut buffer = BytesMut::with_capacity(64);
        let mut room = ReadRoom::default();
        let target = room.readable(&mut buffer, READ_SLICE_BYTES_MAX);
        assert_eq!(target.len(), 64);
        assert!(target.iter().all(|&byte| byte == 0));
        target[..3].copy_from_slice(b"abc");
        target[3..6].copy_from_slice(b"XYZ");
        room.filled(&mut buffer, 3);
        assert_eq!(&buffer[..], b"abc");
        // Bytes written but not filled are still there: the spare was not zeroed again.
        let target = room.readable(&mut buffer, READ_SLICE_BYTES_MAX);
        assert_eq!(target.len(), 61);
        assert_eq!(&target[..3], b"XYZ");
        room.filled(&mut buffer, 3);
        // A frame split off the front leaves the spare where it is.
        let frame = buffer.split_to(4);
        assert_eq!(&frame[..], b"abcX");
        assert_eq!(room.readable(&mut buffer, usize::MAX).len(), 58);
        assert_eq!(room.initialised_bytes, 58);
    }

    #[test]
    fn read_room_forgets_the_spare_when_the_buffer_moves() {
        let mut buffer = BytesMut::with_capacity(16);
        let mut room = ReadRoom::default();
        room.readable(&mut buffer, usize::MAX)[..4].copy_from_slice(b"abcd");
        room.filled(&mut buffer, 4);
        let held = buffer.split_to(4).freeze();
        // The front is still held, so growing allocates elsewhere.
        buffer.reserve(1024);
        let target = room.readable(&mut buffer, READ_SLICE_BYTES_MAX);
        assert!(target.len() >= 1024);
        assert!(target.iter().all(|&byte| byte == 0));
        assert_eq!(&held[..], b"abcd");
    }

    #[test]
    fn read_room_offers_and_zeroes_at_most_the_slice_asked() {
        let mut buffer = BytesMut::with_capacity(1 << 20);
        let mut room = ReadRoom::default();
        assert_eq!(room.readable(&mut buffer, 100).len(), 100);
        // Only what was offered is known initialised; the rest is zeroed when offered.
        assert_eq!(room.initialised_bytes, 100);
        let target = room.readable(&mut buffer, 300);
        assert_eq!(target.len(), 300);
        assert!(target.iter().all(|&byte| byte == 0));
        assert_eq!(room.initialised_bytes, 300);
    }

    #[test]
    #[should_panic]
    fn read_room_refuses_to_expose_more_than_was_readable() {
        let mut buffer = BytesMut::with_capacity(8);
        let mut room = ReadRoom::default();
        let _ = room.readable(&mut buffer, usize::MAX);
        room.filled(&mut buffer, 9);
    }
}
