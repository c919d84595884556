//! A scripted broker for the admin commands' unit tests: it frames, decodes the request header
//! and encodes the response header, so a test writes only the bodies it answers with. Each
//! connection is served on its own thread, as the commands open one per broker they route to.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use wire::generated::api::{request_header_version, response_header_version, ApiKey};
use wire::generated::api_versions_response::ApiVersion;
use wire::generated::{ApiVersionsResponse, RequestHeader, ResponseHeader};
use wire::primitives::{Decodable, Encodable};

/// One request as the scripted broker got it.
pub struct Request {
    pub key: ApiKey,
    pub version: i16,
    /// The request body, after its header.
    pub body: Bytes,
    /// The port the broker listens on (for Metadata answers that name it).
    pub port: u16,
}

/// Starts a broker on a free loopback port; `answer` encodes the response body of each
/// request into its buffer, or returns false to close the connection. Returns HOST:PORT.
pub fn spawn<F>(answer: F) -> String
where
    F: Fn(Request, &mut BytesMut) -> bool + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let answer = answer.clone();
            std::thread::spawn(move || serve(stream.unwrap(), addr.port(), &*answer));
        }
    });
    addr.to_string()
}

fn serve(mut s: TcpStream, port: u16, answer: &dyn Fn(Request, &mut BytesMut) -> bool) {
    loop {
        let mut size = [0u8; 4];
        if s.read_exact(&mut size).is_err() {
            return;
        }
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        s.read_exact(&mut frame).unwrap();
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let mut body = Bytes::from(frame);
        let header =
            RequestHeader::decode(&mut body, request_header_version(key, version)).unwrap();
        let request = Request {
            key: ApiKey::from_i16(key).unwrap(),
            version,
            body,
            port,
        };
        let mut out = BytesMut::new();
        ResponseHeader {
            correlation_id: header.correlation_id,
            ..Default::default()
        }
        .encode(&mut out, response_header_version(key, version))
        .unwrap();
        if !answer(request, &mut out) {
            return;
        }
        s.write_all(&(out.len() as i32).to_be_bytes()).unwrap();
        s.write_all(&out).unwrap();
    }
}

/// An ApiVersions answer offering `(api, min, max)`.
pub fn api_versions(apis: &[(ApiKey, i16, i16)]) -> ApiVersionsResponse {
    ApiVersionsResponse {
        api_keys: apis
            .iter()
            .map(|&(key, min_version, max_version)| ApiVersion {
                api_key: key as i16,
                min_version,
                max_version,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
