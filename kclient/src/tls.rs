//! TLS under a [`crate::conn::Connection`] (feature `tls`): rustls over a buffered socket, the
//! handshake finished at connect so that a refused certificate is an error of connect. The
//! `rustls::ClientConfig` (roots, client certificate, suites, crypto provider) is the
//! caller's.

use std::io::{self, BufReader, IoSlice, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls_pki_types::ServerName;

use crate::error::{Error, Result};

/// The socket under a TLS session, its reads buffered: rustls pulls ciphertext a few KiB
/// at a time, which would otherwise be a system call each.
pub(crate) struct BufferedSocket {
    pub(crate) reader: BufReader<TcpStream>,
    pub(crate) writer: TcpStream,
}

impl Read for BufferedSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf)
    }
}

impl Write for BufferedSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer.write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.writer.write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }
}

/// Opens a TLS session to `addr` over `socket` and completes its handshake.
pub(crate) fn handshake(
    addr: &str,
    config: &Arc<rustls::ClientConfig>,
    socket: BufferedSocket,
) -> Result<rustls::StreamOwned<rustls::ClientConnection, BufferedSocket>> {
    let tls_error = |kind: io::ErrorKind, message: String| Error::Tls {
        addr: addr.to_owned(),
        kind,
        message,
    };
    let name = server_name(addr).map_err(|m| tls_error(io::ErrorKind::InvalidInput, m))?;
    let session = rustls::ClientConnection::new(config.clone(), name)
        .map_err(|e| tls_error(io::ErrorKind::Other, e.to_string()))?;
    let mut tls = rustls::StreamOwned::new(session, socket);
    while tls.conn.is_handshaking() {
        tls.conn
            .complete_io(&mut tls.sock)
            .map_err(|e| tls_error(e.kind(), format!("handshake: {e}")))?;
    }
    Ok(tls)
}

/// The name the server's certificate must carry: the host part of `host:port` (an IP
/// address is matched against the certificate's IP subject alternative names).
pub fn server_name(addr: &str) -> Result<ServerName<'static>, String> {
    let host = match addr.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => addr.rsplit_once(':').map_or(addr, |(h, _)| h),
    };
    ServerName::try_from(host.to_owned()).map_err(|e| format!("TLS name {host}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_names() {
        assert!(matches!(
            server_name("127.0.0.1:9093").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("[::1]:9093").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name("localhost:9093").unwrap(),
            ServerName::DnsName(_)
        ));
    }
}
