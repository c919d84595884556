//! The plain writer over real sockets: file ranges arrive whole, and a cold range waiting for
//! its read does not hold up another connection's hot range on the same shard.

use std::cell::Cell;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;

use futures::io::AsyncReadExt;
use glommio::net::{TcpListener, TcpStream};

use super::pagecache::tests::{close_gate, force_cold, open_gate};
use bytes::Bytes;

use super::{Chunk, FileRange, Frame, SendStats, Transport};

fn run<F: std::future::Future>(f: F) -> F::Output {
    glommio::LocalExecutorBuilder::default()
        .make()
        .expect("glommio executor")
        .run(f)
}

fn file_with(content: &[u8]) -> Arc<OwnedFd> {
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(content).unwrap();
    Arc::new(OwnedFd::from(file))
}

/// A connected pair: (the server side as a `Transport`, the client's stream).
async fn pair(listener: &TcpListener) -> (Transport, TcpStream) {
    let addr = listener.local_addr().unwrap();
    let client = glommio::spawn_local(async move { TcpStream::connect(addr).await.unwrap() });
    let server = listener.accept().await.unwrap();
    (Transport::plain(server), client.await)
}

async fn read_n(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    stream.read_exact(&mut out).await.unwrap();
    out
}

#[test]
fn file_ranges_arrive_whole() {
    run(async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (mut transport, mut client) = pair(&listener).await;
        // Larger than a socket buffer takes at once: the writer meets a full socket and
        // resumes where sendfile stopped.
        let content: Vec<u8> = (0..8_000_000u32).map(|i| (i % 253) as u8).collect();
        let fd = file_with(&content);
        let stats = Rc::new(SendStats::default());
        let range = FileRange::new(fd, 1234, 7_000_000);
        let sent = {
            let stats = stats.clone();
            glommio::spawn_local(async move {
                transport.writer.write_all(b"head").await.unwrap();
                transport.writer.send_file(&range, &stats).await.unwrap();
                transport.writer.close().await;
            })
        };
        let got = read_n(&mut client, 4 + 7_000_000).await;
        sent.await;
        assert_eq!(&got[..4], b"head");
        assert!(got[4..] == content[1234..1234 + 7_000_000]);
        let via_sendfile = stats.sendfile_bytes.get();
        let copied = stats.copied_bytes.get();
        assert_eq!(via_sendfile + copied, 7_000_000);
        assert!(via_sendfile > 0);
        assert_eq!(stats.hot_ranges.get() + stats.cold_ranges.get(), 1);
    });
}

/// Two connections of one shard: A's range is cold and its read-in is held (a slow disk); B's
/// range is hot. B's bytes are sent and received while A still waits, and A's arrive once
/// its read completes. No timing: A cannot complete before the gate opens, and B completing
/// at all while it is closed is the property.
#[test]
fn cold_read_does_not_hold_up_another_connection() {
    run(async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (mut a, mut client_a) = pair(&listener).await;
        let (mut b, mut client_b) = pair(&listener).await;
        let cold: Vec<u8> = (0..300_000u32).map(|i| (i % 101) as u8).collect();
        let hot: Vec<u8> = (0..200_000u32).map(|i| (i % 97) as u8).collect();
        let cold_fd = file_with(&cold);
        let hot_fd = file_with(&hot);
        force_cold(Some(cold_fd.as_raw_fd()));
        close_gate();
        let stats = Rc::new(SendStats::default());
        let a_done = Rc::new(Cell::new(false));
        let a_task = {
            let (stats, a_done) = (stats.clone(), a_done.clone());
            let range = FileRange::new(cold_fd.clone(), 0, cold.len() as u64);
            glommio::spawn_local(async move {
                a.writer.send_file(&range, &stats).await.unwrap();
                a_done.set(true);
                a.writer.close().await;
            })
        };
        let b_task = {
            let stats = stats.clone();
            let range = FileRange::new(hot_fd.clone(), 0, hot.len() as u64);
            glommio::spawn_local(async move {
                b.writer.send_file(&range, &stats).await.unwrap();
                b.writer.close().await;
            })
        };
        let got_b = read_n(&mut client_b, hot.len()).await;
        b_task.await;
        assert!(got_b == hot);
        assert!(
            !a_done.get(),
            "A cannot finish before its read-in is released"
        );
        assert_eq!((stats.hot_ranges.get(), stats.cold_ranges.get()), (1, 0));
        open_gate();
        let got_a = read_n(&mut client_a, cold.len()).await;
        a_task.await;
        assert!(got_a == cold);
        assert_eq!((stats.hot_ranges.get(), stats.cold_ranges.get()), (1, 1));
        assert_eq!(stats.cold_bytes.get(), cold.len() as u64);
        force_cold(None);
    });
}

fn bytes_frame(parts: &[&[u8]]) -> Frame {
    Frame::new(
        parts
            .iter()
            .map(|part| Chunk::Bytes(Bytes::copy_from_slice(part)))
            .collect(),
    )
}

/// Frames written together arrive whole and in order, a fetch's file range among them
/// still sent from its file (sendfile), and frames larger than the socket buffer (the
/// gathered write meets a full socket) as well.
#[test]
fn frames_written_together_keep_their_order_and_file_ranges() {
    run(async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (mut transport, mut client) = pair(&listener).await;
        let records: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let fd = file_with(&records);
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 13) as u8).collect();
        let frames = vec![
            bytes_frame(&[b"one-", b"a", b"b"]),
            bytes_frame(&[b"two"]),
            Frame::new(vec![
                Chunk::Bytes(Bytes::from_static(b"fetch<")),
                Chunk::File(FileRange::new(fd.clone(), 100, 40_000)),
                Chunk::Bytes(Bytes::from_static(b">")),
            ]),
            bytes_frame(&[b"three", b""]),
            bytes_frame(&[&big, b"|"]),
            bytes_frame(&[&big[..1_000_000]]),
        ];
        let mut expected = Vec::new();
        for frame in &frames {
            expected.extend(frame.to_vec().unwrap());
        }
        let stats = Rc::new(SendStats::default());
        let sent = {
            let stats = stats.clone();
            glommio::spawn_local(async move {
                let refs: Vec<&Frame> = frames.iter().collect();
                transport.writer.write_frames(&refs, &stats).await.unwrap();
                transport.writer.close().await;
            })
        };
        let got = read_n(&mut client, expected.len()).await;
        sent.await;
        assert!(got == expected, "bytes differ from the frames in order");
        assert_eq!(
            stats.sendfile_bytes.get() + stats.copied_bytes.get(),
            40_000
        );
        assert!(stats.sendfile_bytes.get() > 0);
    });
}

#[test]
fn gather_advances_across_pieces() {
    use super::plain::Gather;
    let pieces: Vec<&[u8]> = vec![b"", b"abc", b"", b"de", b"f"];
    let mut gather = Gather::new(&pieces);
    assert_eq!(gather.current(), b"abc");
    assert_eq!(gather.iovecs().len(), 3);
    gather.advance(2);
    assert_eq!(gather.current(), b"c");
    gather.advance(2);
    assert_eq!(gather.current(), b"e");
    assert_eq!(gather.iovecs().len(), 2);
    gather.advance(2);
    assert!(gather.is_done());
    let none: Vec<&[u8]> = vec![b"", b""];
    assert!(Gather::new(&none).is_done());
}

/// `read_ready` takes what the socket holds into uninitialised memory without waiting, in
/// order with glommio's own reads, says `None` when nothing is there, and `Some(Ok(0))` once
/// the peer has closed.
#[test]
fn read_ready_reads_what_is_there_in_order_without_waiting() {
    use futures::io::AsyncWriteExt;
    use std::mem::MaybeUninit;
    run(async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let (mut transport, mut client) = pair(&listener).await;
        let mut spare = vec![MaybeUninit::<u8>::uninit(); 64];
        assert!(transport.reader.read_ready(&mut spare).is_none());
        client.write_all(b"first").await.unwrap();
        let mut got = [0u8; 5];
        let n = transport.reader.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], &b"first"[..n]);
        let mut out = got[..n].to_vec();
        client.write_all(b"-second").await.unwrap();
        // Loopback delivers at once, but give the kernel a moment on a loaded machine.
        let mut ready = None;
        for _ in 0..1000 {
            ready = transport.reader.read_ready(&mut spare);
            if ready.is_some() {
                break;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        let read = ready.expect("bytes were sent").unwrap();
        // SAFETY: the kernel wrote the first `read` bytes of `spare`.
        out.extend(spare[..read].iter().map(|b| unsafe { b.assume_init() }));
        while out.len() < b"first-second".len() {
            let mut more = [0u8; 16];
            let n = transport.reader.read(&mut more).await.unwrap();
            out.extend_from_slice(&more[..n]);
        }
        assert_eq!(out, b"first-second");
        client.close().await.unwrap();
        drop(client);
        let mut closed = None;
        for _ in 0..1000 {
            closed = transport.reader.read_ready(&mut spare);
            if closed.is_some() {
                break;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert_eq!(closed.expect("the close is seen").unwrap(), 0);
    });
}
