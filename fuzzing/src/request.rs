//! Request headers and message bodies: one generic check over every generated type, reached
//! from an API key through the table below.

use bytes::{Bytes, BytesMut};
use wire::generated::api::{self, ApiKey};
use wire::generated::*;
use wire::primitives::{Decodable, Encodable, Message};

/// The checks of one message type at one version: decode errs or succeeds without panicking;
/// an out-of-range version always errs; a decoded value re-encodes to exactly `encoded_len`
/// bytes, which decode again and re-encode to the same bytes. (Not to the input's bytes:
/// a decoder accepts non-minimal varints, any non-zero bool and unsorted tags.)
fn check<T: Decodable + Encodable + Message>(body: &Bytes, version: i16) {
    let in_range = (T::MIN_VERSION..=T::MAX_VERSION).contains(&version);
    let Ok(message) = T::decode(&mut body.clone(), version) else {
        return;
    };
    assert!(
        in_range,
        "{} decoded at version {version}, outside {}..={}",
        std::any::type_name::<T>(),
        T::MIN_VERSION,
        T::MAX_VERSION
    );
    let mut out = BytesMut::new();
    message
        .encode(&mut out, version)
        .expect("a decoded message encodes");
    assert_eq!(
        out.len(),
        message.encoded_len(version),
        "encoded_len is exact"
    );
    let out = out.freeze();
    let again = T::decode(&mut out.clone(), version).expect("an encoded message decodes");
    let mut out2 = BytesMut::new();
    again
        .encode(&mut out2, version)
        .expect("a decoded message encodes");
    assert_eq!(out, out2.freeze(), "encode-decode-encode is stable");
}

/// A version in `T`'s range for any `version` (itself when it is in range).
fn in_range<T: Message>(version: i16) -> i16 {
    let span = i32::from(T::MAX_VERSION) - i32::from(T::MIN_VERSION) + 1;
    let offset = (i32::from(version) - i32::from(T::MIN_VERSION)).rem_euclid(span);
    // `offset < span <= i16::MAX`, so the sum is a valid i16.
    i16::try_from(i32::from(T::MIN_VERSION) + offset).unwrap_or(T::MIN_VERSION)
}

fn check_at<T: Decodable + Encodable + Message>(body: &Bytes, version: i16) {
    check::<T>(body, version);
    let mapped = in_range::<T>(version);
    if mapped != version {
        check::<T>(body, mapped);
    }
}

macro_rules! apis {
    ($($key:ident => $request:ident, $response:ident;)*) => {
        /// Checks `body` as the request (or response) of `key` at `version`.
        fn dispatch(key: ApiKey, response: bool, body: &Bytes, version: i16) {
            match (key, response) {
                $(
                    (ApiKey::$key, false) => check_at::<$request>(body, version),
                    (ApiKey::$key, true) => check_at::<$response>(body, version),
                )*
            }
        }

        /// Whether the table above names every API key the generated code knows, and each
        /// request and response type carries its key (a new schema must be added here).
        pub fn all_apis_covered() -> bool {
            let listed = [$(ApiKey::$key),*];
            ApiKey::ALL.iter().all(|key| listed.contains(key))
                && listed.len() == ApiKey::ALL.len()
                $(
                    && <$request as Message>::API_KEY == ApiKey::$key as i16
                    && <$response as Message>::API_KEY == ApiKey::$key as i16
                )*
        }
    };
}

include!("api_list.in");

/// The known API key for any raw key: itself when known, else one chosen by it, so that
/// mutated keys still reach a decoder.
fn api_key(raw: i16) -> ApiKey {
    ApiKey::from_i16(raw).unwrap_or_else(|| {
        let index = usize::from(raw.unsigned_abs()) % ApiKey::ALL.len();
        ApiKey::ALL[index]
    })
}

pub(crate) fn body(data: &[u8]) {
    let Some((prefix, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let raw_key = i16::from_be_bytes([prefix[0], prefix[1]]);
    let version = i16::from_be_bytes([prefix[2], prefix[3]]);
    let response = raw_key < 0;
    let key = api_key(raw_key & 0x7fff);
    dispatch(key, response, &Bytes::copy_from_slice(rest), version);
}

fn key_and_version(data: &[u8]) -> Option<(i16, i16)> {
    let prefix = data.first_chunk::<4>()?;
    Some((
        i16::from_be_bytes([prefix[0], prefix[1]]),
        i16::from_be_bytes([prefix[2], prefix[3]]),
    ))
}

pub(crate) fn header(data: &[u8]) {
    let Some((key, version)) = key_and_version(data) else {
        return;
    };
    let bytes = Bytes::copy_from_slice(data);
    let chosen = api::request_header_version(key, version);
    for header_version in [chosen, 0, 1, 2] {
        let mut buf = bytes.clone();
        let Ok(header) = RequestHeader::decode(&mut buf, header_version) else {
            continue;
        };
        assert_eq!(header.request_api_key, key);
        assert_eq!(header.request_api_version, version);
        let consumed = bytes.len() - buf.len();
        let mut out = BytesMut::new();
        header
            .encode(&mut out, header_version)
            .expect("a decoded header encodes");
        assert_eq!(out.len(), header.encoded_len(header_version));
        let again = RequestHeader::decode(&mut out.clone().freeze(), header_version)
            .expect("an encoded header decodes");
        assert_eq!(again, header);
        // Non-flexible headers have one encoding, so they re-encode to the bytes read.
        if header_version < 2 {
            assert_eq!(&out[..], &data[..consumed]);
        }
    }
}

/// A frame body as the broker takes it: header at the version its key and version call
/// for, then the body as that request (the broker refuses unknown keys before decoding;
/// those end here).
pub(crate) fn decode_request(frame_body: &Bytes) {
    let Some((key, version)) = key_and_version(frame_body) else {
        return;
    };
    let mut buf = frame_body.clone();
    if RequestHeader::decode(&mut buf, api::request_header_version(key, version)).is_err() {
        return;
    }
    if let Some(key) = ApiKey::from_i16(key) {
        dispatch(key, false, &buf, version);
    }
}
