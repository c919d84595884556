//! The `/metrics` HTTP/1.1 endpoint: one plain std thread accepting, one short-lived std
//! thread per scrape connection, nothing on a shard's core but the snapshot each shard takes
//! when asked (see `snapshot`).
//!
//! One request per connection (`Connection: close`), which is all Prometheus needs. Bounds:
//! [`MAX_SCRAPE_CONNECTIONS`] served at once (more get 503), [`MAX_REQUEST_HEAD_BYTES`] of
//! request head (more get 431), [`READ_TIMEOUT`] / [`WRITE_TIMEOUT`] per socket operation (a
//! client that stalls is dropped). `GET` (and `HEAD`) of `/metrics` only: other paths get
//! 404, other methods 405, a request line that does not parse 400.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::exposition::CONTENT_TYPE;
use super::render::render;
use super::snapshot::{Board, SNAPSHOT_WAIT};

/// Scrape connections served at once: Prometheus scrapes one target over one connection;
/// a few leave room for a second Prometheus and a person with curl, and bound the threads.
pub const MAX_SCRAPE_CONNECTIONS: usize = 4;
/// Largest request line plus headers accepted (curl and Prometheus send a few hundred bytes).
pub const MAX_REQUEST_HEAD_BYTES: usize = 8 * 1024;
/// Longest wait for the next bytes of a request head.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for the client to take the next bytes of a response.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// After the accept thread fails to accept (EMFILE, say), how long it waits to try again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `/metrics` on `listener` from a new thread, for the life of the process.
pub fn spawn(listener: TcpListener, board: Arc<Board>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("metrics-http".to_string())
        .spawn(move || accept_loop(listener, board))
        .map(|_| ())
}

fn accept_loop(listener: TcpListener, board: Arc<Board>) {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "metrics endpoint: accept failed");
                std::thread::sleep(ACCEPT_BACKOFF);
                continue;
            }
        };
        let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        if active.fetch_add(1, Ordering::AcqRel) >= MAX_SCRAPE_CONNECTIONS {
            active.fetch_sub(1, Ordering::AcqRel);
            let mut stream = stream;
            let _ = respond(
                &mut stream,
                503,
                "Service Unavailable",
                &[],
                b"too many scrapes at once\n",
                false,
            );
            continue;
        }
        let board = board.clone();
        let done = ActiveSlot(active.clone());
        let spawned = std::thread::Builder::new()
            .name("metrics-scrape".to_string())
            .spawn(move || {
                let _done = done;
                serve(stream, &board);
            });
        if let Err(error) = spawned {
            tracing::warn!(%error, "metrics endpoint: cannot start a scrape thread");
        }
    }
}

/// Frees its place under `MAX_SCRAPE_CONNECTIONS` when the scrape ends.
struct ActiveSlot(Arc<AtomicUsize>);

impl Drop for ActiveSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Metrics { head_only: bool },
    NotFound,
    MethodNotAllowed,
    BadRequest,
}

/// Routes a request by its request line.
pub fn route(head: &[u8]) -> Route {
    let Some(line) = head.split(|&b| b == b'\n').next() else {
        return Route::BadRequest;
    };
    let Ok(line) = std::str::from_utf8(line) else {
        return Route::BadRequest;
    };
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || !target.starts_with('/') {
        return Route::BadRequest;
    }
    let path = target.split('?').next().unwrap_or(target);
    if path != "/metrics" {
        return Route::NotFound;
    }
    match method {
        "GET" => Route::Metrics { head_only: false },
        "HEAD" => Route::Metrics { head_only: true },
        _ => Route::MethodNotAllowed,
    }
}

/// Where the head ends (just past its blank line), if it has.
fn head_end(buffer: &[u8]) -> Option<usize> {
    buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
        .or_else(|| buffer.windows(2).position(|w| w == b"\n\n").map(|i| i + 2))
}

fn serve(mut stream: TcpStream, board: &Board) {
    let mut head = [0u8; MAX_REQUEST_HEAD_BYTES];
    let mut filled = 0;
    let complete = loop {
        if head_end(&head[..filled]).is_some() {
            break true;
        }
        if filled == head.len() {
            break false;
        }
        match stream.read(&mut head[filled..]) {
            Ok(0) => return, // closed before a whole head: nothing to answer
            Ok(n) => filled += n,
            Err(_) => return, // timed out or reset
        }
    };
    if !complete {
        let _ = respond(
            &mut stream,
            431,
            "Request Header Fields Too Large",
            &[],
            b"request head too large\n",
            false,
        );
        return;
    }
    let _ = match route(&head[..filled]) {
        Route::Metrics { head_only } => {
            let text = render(&board.collect(SNAPSHOT_WAIT));
            respond(
                &mut stream,
                200,
                "OK",
                &[("Content-Type", CONTENT_TYPE)],
                text.as_bytes(),
                head_only,
            )
        }
        Route::NotFound => respond(
            &mut stream,
            404,
            "Not Found",
            &[],
            b"not found; try /metrics\n",
            false,
        ),
        Route::MethodNotAllowed => respond(
            &mut stream,
            405,
            "Method Not Allowed",
            &[("Allow", "GET, HEAD")],
            b"method not allowed\n",
            false,
        ),
        Route::BadRequest => respond(
            &mut stream,
            400,
            "Bad Request",
            &[],
            b"bad request\n",
            false,
        ),
    };
}

fn respond(
    stream: &mut TcpStream,
    status: u16,
    reason: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {reason}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !headers.iter().any(|(name, _)| *name == "Content-Type") {
        head.push_str("Content-Type: text/plain; charset=utf-8\r\n");
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()?;
    // Half-close, then let the client see the end: a plain close with its request bytes
    // unread could reset the connection before it read the answer.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 512];
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_method_and_path() {
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Route::Metrics { head_only: false }
        );
        assert_eq!(
            route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Route::Metrics { head_only: false }
        );
        assert_eq!(
            route(b"HEAD /metrics HTTP/1.1\r\n\r\n"),
            Route::Metrics { head_only: true }
        );
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(route(b"GET /metricsx HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Route::MethodNotAllowed
        );
        assert_eq!(route(b"GET /metrics\r\n\r\n"), Route::BadRequest);
        assert_eq!(route(b"GET /metrics SPDY/3\r\n\r\n"), Route::BadRequest);
        assert_eq!(route(b"\xff\xfe\r\n\r\n"), Route::BadRequest);
    }

    #[test]
    fn head_end_finds_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n"), None);
        assert_eq!(head_end(b"GET / HTTP/1.0\n\n"), Some(16));
    }

    /// Exchanges retried while every scrape place is still held by an earlier one.
    const BUSY_RETRIES: usize = 250;

    /// The whole endpoint over a real socket, with a board whose one shard answers.
    #[test]
    fn serves_scrapes_and_refuses_what_it_must() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let board = Board::new(1);
        let poster = board.clone();
        std::thread::spawn(move || loop {
            let wanted = poster.wanted();
            poster.post(crate::metrics::snapshot::ShardSnapshot {
                generation: wanted,
                shard: 0,
                connections_open: 3,
                ..Default::default()
            });
            std::thread::sleep(Duration::from_millis(5));
        });
        spawn(listener, board).unwrap();
        let once = |request: &[u8]| {
            let mut stream = TcpStream::connect(address).unwrap();
            stream.write_all(request).unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).unwrap();
            answer
        };
        // A scrape's thread frees its place (MAX_SCRAPE_CONNECTIONS) only when it ends, a
        // little after its client read the answer: on a busy machine the next exchanges can
        // find every place still held and get a 503, which is the endpoint doing its job.
        let exchange = |request: &[u8]| {
            for _ in 0..BUSY_RETRIES {
                let answer = once(request);
                if !answer.starts_with("HTTP/1.1 503 ") {
                    return answer;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            once(request)
        };
        let ok = exchange(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(ok.contains("\nbroker_connections_open{shard=\"0\"} 3\n"));
        assert!(ok.contains("\nbroker_metrics_stale_shards 0\n"));
        assert!(exchange(b"GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404 "));
        let not_allowed = exchange(b"DELETE /metrics HTTP/1.1\r\n\r\n");
        assert!(not_allowed.starts_with("HTTP/1.1 405 "));
        assert!(not_allowed.contains("Allow: GET, HEAD\r\n"));
        assert!(exchange(b"nonsense\r\n\r\n").starts_with("HTTP/1.1 400 "));
        let mut huge = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
        huge.resize(MAX_REQUEST_HEAD_BYTES + 100, b'a');
        assert!(exchange(&huge).starts_with("HTTP/1.1 431 "));
    }
}
