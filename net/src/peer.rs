//! Links between controllers: one-way messages (the metadata quorum's Raft messages) from this
//! node to another, over TCP, on the CONTROLLER listener.
//!
//! A message travels as a Kafka request frame (size, request header v2, body) with an API key
//! outside Kafka's range (`PEER_MESSAGE_KEY`), so the CONTROLLER listener can tell a peer's
//! message from a Kafka client's request (kafka-metadata-quorum.sh `--bootstrap-controller`
//! sends ApiVersions and DescribeQuorum there) by the key alone, and a Kafka client or tool
//! sent to the wrong port gets a closed connection with a reason, never a misread. No
//! response is sent: Raft retries on its own (heartbeats, re-sent appends), so a message lost
//! with a connection costs a round, not correctness.
//!
//! Bounds: a frame is at most `MAX_PEER_FRAME` bytes both ways (a larger one closes the
//! reading side's connection); each destination has a queue of at most `MAX_PEER_QUEUE`
//! messages, and a message sent to a full queue (the peer down or slow) is dropped and
//! counted, never buffered without bound; reconnection backs off from
//! `RECONNECT_BACKOFF_MIN` to `RECONNECT_BACKOFF_MAX`.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::time::Duration;

use futures::io::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::{TcpListener, TcpStream};

/// The request API key of a peer message: above every Kafka API key (they end below 100), and
/// never listed in ApiVersions.
pub const PEER_MESSAGE_KEY: i16 = 32_000;
/// The only version of a peer message.
pub const PEER_MESSAGE_VERSION: i16 = 0;
/// The largest frame (after the size field) a link writes or reads: a Raft snapshot of the
/// metadata image (up to 64 MiB, `quorum::log_store::MAX_SNAPSHOT_BYTES`) travels in one message
/// with a message's worth of entries.
pub const MAX_PEER_FRAME: usize = 72 << 20;
/// Messages waiting for one destination at most.
pub const MAX_PEER_QUEUE: usize = 4096;
pub const RECONNECT_BACKOFF_MIN: Duration = Duration::from_millis(20);
pub const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long a connection attempt may take before the link backs off and tries again.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A write blocked this long (a peer that stopped reading, or gone without a reset) ends the
/// connection; the link reconnects.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(3);
/// Connections a controller listener serves at once (each voter keeps one to each other
/// voter; a few more cover reconnections overlapping old connections). Past it a new
/// connection is closed at once.
pub const MAX_PEER_CONNECTIONS: usize = 64;

/// Bytes of a frame before the sender's node id: api key, version, correlation id, a null
/// client id, no tagged fields.
const HEADER_LEN: usize = 2 + 2 + 4 + 2 + 1;

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("peer frame of {0} bytes exceeds the limit of {MAX_PEER_FRAME}")]
    TooLarge(usize),
    #[error("not a peer message: API key {key} version {version}")]
    NotPeerMessage { key: i16, version: i16 },
    #[error("malformed peer frame: {0}")]
    Malformed(&'static str),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// One message as it travels: size, header, sender, payload.
pub fn encode_frame(from: i32, correlation_id: i32, payload: &[u8]) -> Result<Vec<u8>, PeerError> {
    let len = HEADER_LEN + 4 + payload.len();
    if len > MAX_PEER_FRAME {
        return Err(PeerError::TooLarge(len));
    }
    let mut frame = Vec::with_capacity(4 + len);
    frame.extend_from_slice(&(len as i32).to_be_bytes());
    frame.extend_from_slice(&PEER_MESSAGE_KEY.to_be_bytes());
    frame.extend_from_slice(&PEER_MESSAGE_VERSION.to_be_bytes());
    frame.extend_from_slice(&correlation_id.to_be_bytes());
    frame.extend_from_slice(&(-1i16).to_be_bytes()); // client id: null
    frame.push(0); // no tagged fields
    frame.extend_from_slice(&from.to_be_bytes());
    frame.extend_from_slice(payload);
    Ok(frame)
}

/// The sender and payload of a frame's bytes after its size field.
pub fn decode_frame(body: &[u8]) -> Result<(i32, &[u8]), PeerError> {
    if body.len() < 4 {
        return Err(PeerError::Malformed("shorter than a request header"));
    }
    let key = i16::from_be_bytes([body[0], body[1]]);
    let version = i16::from_be_bytes([body[2], body[3]]);
    if key != PEER_MESSAGE_KEY || version != PEER_MESSAGE_VERSION {
        return Err(PeerError::NotPeerMessage { key, version });
    }
    if body.len() < HEADER_LEN + 4 {
        return Err(PeerError::Malformed("shorter than a peer header"));
    }
    if body[8..10] != (-1i16).to_be_bytes() || body[10] != 0 {
        return Err(PeerError::Malformed("a client id or tagged fields"));
    }
    let from = i32::from_be_bytes([body[11], body[12], body[13], body[14]]);
    Ok((from, &body[HEADER_LEN + 4..]))
}

/// Reads frames from `stream` until it closes, handing each sender and payload to `deliver`.
/// A frame over the bound, or one that is not a peer message, ends the connection with the
/// reason.
pub async fn read_frames(
    stream: &mut TcpStream,
    mut deliver: impl FnMut(i32, Vec<u8>),
) -> Result<(), PeerError> {
    serve_connection(stream, &mut deliver, None).await
}

/// Answers a Kafka request frame (no size prefix) that arrived on the controller listener
/// with the whole response frame, or `Err` with the reason to close the connection.
pub type RequestHandler =
    Rc<dyn Fn(Vec<u8>) -> Pin<Box<dyn Future<Output = Result<Vec<u8>, String>>>>>;

/// Reads frames until the connection closes: peer messages go to `deliver`, Kafka requests to
/// `requests` (answered in order, one at a time, as Kafka answers a connection's requests).
async fn serve_connection(
    stream: &mut TcpStream,
    deliver: &mut impl FnMut(i32, Vec<u8>),
    requests: Option<&RequestHandler>,
) -> Result<(), PeerError> {
    let mut size = [0u8; 4];
    loop {
        match stream.read_exact(&mut size).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let len = i32::from_be_bytes(size);
        let len = usize::try_from(len).map_err(|_| PeerError::Malformed("negative size"))?;
        if len > MAX_PEER_FRAME {
            return Err(PeerError::TooLarge(len));
        }
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body).await?;
        match (decode_frame(&body), requests) {
            (Ok((from, payload)), _) => {
                let payload = payload.to_vec();
                deliver(from, payload);
            }
            (Err(PeerError::NotPeerMessage { .. }), Some(handler)) => {
                let response = handler(body).await.map_err(PeerError::Refused)?;
                let write = stream.write_all(&response);
                let timeout = glommio::timer::sleep(WRITE_TIMEOUT);
                futures::pin_mut!(write, timeout);
                match futures::future::select(write, timeout).await {
                    futures::future::Either::Left((written, _)) => written?,
                    futures::future::Either::Right(_) => {
                        return Err(PeerError::Refused("response write timed out".into()))
                    }
                }
            }
            (Err(error), _) => return Err(error),
        }
    }
}

/// Accepts peers' connections on `listener` and passes every message to `inbox` (dropped and
/// counted in `dropped` when the inbox is full: the receiver is behind, and Raft re-sends);
/// Kafka requests (brokers' registrations, heartbeats and forwarded admin requests) go to
/// `requests` when given, else close their connection.
/// Dropping the future (the controller stopping) shuts every accepted connection down, so
/// the peers see it closed and reconnect to whatever listens next.
pub async fn serve(
    listener: TcpListener,
    inbox: Rc<LocalSender<(i32, Vec<u8>)>>,
    dropped: Rc<Cell<u64>>,
    requests: Option<RequestHandler>,
) -> io::Result<()> {
    let open = OpenConnections::default();
    let mut next_id: u64 = 0;
    loop {
        let mut stream = listener.accept().await?;
        if open.0.borrow().len() >= MAX_PEER_CONNECTIONS {
            tracing::warn!(
                peer = ?stream.peer_addr().ok(),
                limit = MAX_PEER_CONNECTIONS,
                "closing a controller connection: too many open"
            );
            continue;
        }
        next_id += 1;
        let id = next_id;
        open.0.borrow_mut().insert(id, stream.as_raw_fd());
        let registry = open.0.clone();
        let inbox = inbox.clone();
        let dropped = dropped.clone();
        let requests = requests.clone();
        glommio::spawn_local(async move {
            let peer = stream.peer_addr().ok();
            let mut deliver = |from, payload| {
                if inbox.try_send((from, payload)).is_err() {
                    dropped.set(dropped.get() + 1);
                }
            };
            let result = serve_connection(&mut stream, &mut deliver, requests.as_ref()).await;
            registry.borrow_mut().remove(&id);
            if let Err(error) = result {
                tracing::info!(?peer, %error, "closing a controller connection");
            }
        })
        .detach();
    }
}

/// Sends one Kafka request frame (`frame`, size prefix included) to `addr` on a connection of
/// its own and returns the response frame after its size field; the whole exchange is
/// bounded by `timeout`, the response by `MAX_PEER_FRAME`.
pub async fn round_trip(
    addr: SocketAddr,
    frame: &[u8],
    timeout: Duration,
) -> Result<Vec<u8>, PeerError> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|error| io::Error::new(io::ErrorKind::ConnectionRefused, error.to_string()))?;
        let _ = stream.set_nodelay(true);
        stream.write_all(frame).await?;
        let mut size = [0u8; 4];
        stream.read_exact(&mut size).await?;
        let len = usize::try_from(i32::from_be_bytes(size))
            .map_err(|_| PeerError::Malformed("negative size"))?;
        if len > MAX_PEER_FRAME {
            return Err(PeerError::TooLarge(len));
        }
        let mut body = vec![0u8; len];
        stream.read_exact(&mut body).await?;
        Ok(body)
    };
    let deadline = glommio::timer::sleep(timeout);
    futures::pin_mut!(exchange, deadline);
    match futures::future::select(exchange, deadline).await {
        futures::future::Either::Left((result, _)) => result,
        futures::future::Either::Right(_) => Err(PeerError::Io(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no answer from {addr} within {} ms", timeout.as_millis()),
        ))),
    }
}

/// The descriptors of the connections `serve` reads, shut down when it stops.
#[derive(Default)]
struct OpenConnections(Rc<RefCell<BTreeMap<u64, RawFd>>>);

impl Drop for OpenConnections {
    fn drop(&mut self) {
        for fd in self.0.borrow().values() {
            // SAFETY: each descriptor belongs to a reader task's stream, still open: a reader
            // removes its entry before its stream is dropped, and all run on this thread.
            // shutdown(2) only ends the connection (the peer sees it closed; the reader sees
            // end of file and drops its stream); the descriptor stays the stream's to close.
            unsafe {
                libc::shutdown(*fd, libc::SHUT_RDWR);
            }
        }
    }
}

/// Whether the peer has closed the connection (a read would see end of file), without
/// waiting or taking any byte.
fn peer_closed(stream: &TcpStream) -> bool {
    let mut byte = 0u8;
    // SAFETY: a non-blocking one-byte peek into a local on the stream's open descriptor.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&mut byte as *mut u8).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n == 0
}

/// The sending end of a link to one peer: a bounded queue drained by a task that keeps a
/// connection open (reconnecting with backoff).
pub struct PeerLink {
    queue: LocalSender<Vec<u8>>,
    dropped: Rc<Cell<u64>>,
    closed: Rc<Cell<bool>>,
}

impl PeerLink {
    /// Starts a link from node `me` to the peer at `to`, on the current glommio executor.
    pub fn spawn(me: i32, to: SocketAddr) -> PeerLink {
        let (queue, pending) = local_channel::new_bounded(MAX_PEER_QUEUE);
        let closed = Rc::new(Cell::new(false));
        glommio::spawn_local(run_link(me, to, pending, closed.clone())).detach();
        PeerLink {
            queue,
            dropped: Rc::new(Cell::new(0)),
            closed,
        }
    }

    /// Queues `payload` for the peer; false (and counted) when the queue is full.
    pub fn send(&self, payload: Vec<u8>) -> bool {
        let sent = self.queue.try_send(payload).is_ok();
        if !sent {
            self.dropped.set(self.dropped.get() + 1);
        }
        sent
    }

    /// Messages dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.get()
    }

    /// Messages waiting.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}

impl Drop for PeerLink {
    fn drop(&mut self) {
        self.closed.set(true);
    }
}

async fn run_link(
    me: i32,
    to: SocketAddr,
    pending: LocalReceiver<Vec<u8>>,
    closed: Rc<Cell<bool>>,
) {
    let mut backoff = RECONNECT_BACKOFF_MIN;
    let mut correlation_id: i32 = 0;
    // A message taken from the queue when the connection turned out closed: sent first on
    // the next one.
    let mut carried: Option<Vec<u8>> = None;
    while !closed.get() {
        let mut stream = match TcpStream::connect_timeout(to, CONNECT_TIMEOUT).await {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%to, %error, "controller link: connect failed");
                glommio::timer::sleep(backoff).await;
                backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        backoff = RECONNECT_BACKOFF_MIN;
        tracing::debug!(%to, "controller link: connected");
        loop {
            let payload = match carried.take() {
                Some(payload) => payload,
                None => match pending.recv().await {
                    Some(payload) => payload,
                    None => return, // the link was dropped
                },
            };
            // The peer closes when it stops or restarts: writing into that connection would
            // succeed and be lost, so look first.
            if peer_closed(&stream) {
                tracing::debug!(%to, "controller link: peer closed; reconnecting");
                carried = Some(payload);
                break;
            }
            correlation_id = correlation_id.wrapping_add(1);
            let frame = match encode_frame(me, correlation_id, &payload) {
                Ok(frame) => frame,
                Err(error) => {
                    tracing::warn!(%to, %error, "controller link: message not sent");
                    continue;
                }
            };
            if let Err(error) = stream.write_all(&frame).await {
                tracing::debug!(%to, %error, "controller link: write failed; reconnecting");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<F: std::future::Future>(f: F) -> F::Output {
        glommio::LocalExecutorBuilder::default()
            .make()
            .expect("glommio executor")
            .run(f)
    }

    #[test]
    fn frames_round_trip_and_refuse_what_is_not_theirs() {
        let frame = encode_frame(7, 1, b"raft").unwrap();
        let (from, payload) = decode_frame(&frame[4..]).unwrap();
        assert_eq!((from, payload), (7, &b"raft"[..]));
        assert_eq!(
            i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize,
            frame.len() - 4
        );
        // A Kafka ApiVersions request header is not a peer message.
        let mut api_versions = frame[4..].to_vec();
        api_versions[0..2].copy_from_slice(&18i16.to_be_bytes());
        assert!(matches!(
            decode_frame(&api_versions),
            Err(PeerError::NotPeerMessage { key: 18, .. })
        ));
        for cut in 0..HEADER_LEN + 4 {
            assert!(decode_frame(&frame[4..4 + cut]).is_err(), "cut {cut}");
        }
        assert!(matches!(
            encode_frame(1, 1, &vec![0; MAX_PEER_FRAME]),
            Err(PeerError::TooLarge(_))
        ));
    }

    #[test]
    fn messages_arrive_in_order_and_survive_a_restarted_peer() {
        run(async {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let link = PeerLink::spawn(3, addr);
            for i in 0..1000u32 {
                assert!(link.send(i.to_be_bytes().to_vec()));
            }
            // The first incarnation of the peer reads the thousand messages, then dies: its
            // connection and listener close.
            {
                let mut stream = listener.accept().await.unwrap();
                let mut got = Vec::new();
                while got.len() < 1000 {
                    let mut size = [0u8; 4];
                    stream.read_exact(&mut size).await.unwrap();
                    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
                    stream.read_exact(&mut body).await.unwrap();
                    let (from, payload) = decode_frame(&body).unwrap();
                    got.push((from, payload.to_vec()));
                }
                let want: Vec<_> = (0..1000u32)
                    .map(|i| (3, i.to_be_bytes().to_vec()))
                    .collect();
                assert_eq!(got, want);
            }
            drop(listener);
            // It comes back on the same port: the link reconnects, and messages sent once it
            // is back arrive (those in flight at the cut may be lost).
            let listener = loop {
                match TcpListener::bind(addr) {
                    Ok(l) => break l,
                    Err(_) => glommio::timer::sleep(Duration::from_millis(10)).await,
                }
            };
            let (inbox, received) = local_channel::new_bounded(MAX_PEER_QUEUE);
            let dropped = Rc::new(Cell::new(0));
            let _server = glommio::spawn_local(serve(listener, Rc::new(inbox), dropped, None));
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            let mut got = None;
            while got.is_none() && std::time::Instant::now() < deadline {
                link.send(b"again".to_vec());
                let wait = glommio::timer::sleep(Duration::from_millis(50));
                got = match futures::future::select(Box::pin(received.recv()), Box::pin(wait)).await
                {
                    futures::future::Either::Left((message, _)) => message,
                    futures::future::Either::Right(_) => None,
                };
            }
            assert_eq!(got, Some((3, b"again".to_vec())));
        });
    }

    #[test]
    fn a_down_peer_costs_at_most_the_queue() {
        run(async {
            // Nothing listens here: every connect fails and the queue fills.
            let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
            let link = PeerLink::spawn(1, addr);
            for _ in 0..MAX_PEER_QUEUE + 10 {
                link.send(vec![0; 16]);
            }
            assert_eq!(link.queued(), MAX_PEER_QUEUE);
            assert_eq!(link.dropped(), 10);
        });
    }
}
