//! Splits client-to-broker frames recorded by `scripts/fuzz_corpus.py` into the five fuzz
//! corpora: usage `corpus_split <frames dir> <corpus root>`.
//!
//! Frames are files named `<connection>-<sequence>.bin` holding the size prefix and body.
//! Each target's directory is replaced; inputs are named by a hash of their content (so
//! duplicates collapse) and grouped by what makes them differ for a decoder (API key,
//! version, codec), keeping the smallest input of each group, so that the corpus stays small
//! and broad.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use wire::generated::api::{self, ApiKey};
use wire::generated::{
    ProduceRequest, RequestHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use wire::primitives::Decodable;
use wire::record_batch::BatchHeader;

/// Most inputs kept per target, so the whole corpus stays near 200 files.
const CAPS: [(&str, usize); 5] = [
    ("frame", 50),
    ("request_header", 20),
    ("request_body", 60),
    ("record_batch", 40),
    ("sasl", 20),
];

/// Group key to the smallest input of that group.
type Groups = BTreeMap<String, Vec<u8>>;

fn keep(groups: &mut Groups, key: String, input: Vec<u8>) {
    match groups.get(&key) {
        Some(kept) if kept.len() <= input.len() => {}
        _ => {
            groups.insert(key, input);
        }
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn codec_of(records: &[u8]) -> String {
    BatchHeader::parse(records).map_or_else(
        |_| "unparsed".to_owned(),
        |h| {
            format!(
                "{:?}-tx{}-pid{}",
                h.compression(),
                h.is_transactional(),
                h.producer_id >= 0
            )
        },
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, frames_dir, out_dir] = &args[..] else {
        return Err("usage: corpus_split <frames dir> <corpus root>".into());
    };
    let mut paths: Vec<_> = std::fs::read_dir(frames_dir)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.sort();

    let mut groups: BTreeMap<&str, Groups> = BTreeMap::new();
    // Per connection: the SASL mechanism selector and the tokens so far.
    let mut sasl: BTreeMap<String, (u8, Vec<u8>)> = BTreeMap::new();
    for path in &paths {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let connection = name.split('-').next().unwrap_or_default().to_owned();
        let frame = std::fs::read(path)?;
        let Some(body) = frame.get(4..) else { continue };
        let Some(prefix) = body.first_chunk::<4>() else {
            continue;
        };
        let key = i16::from_be_bytes([prefix[0], prefix[1]]);
        let version = i16::from_be_bytes([prefix[2], prefix[3]]);
        let mut rest = Bytes::copy_from_slice(body);
        let Ok(header) =
            RequestHeader::decode(&mut rest, api::request_header_version(key, version))
        else {
            continue;
        };
        let header_len = body.len() - rest.len();
        let mut group = format!("{key:03}-v{version:02}");
        if key == ApiKey::Produce as i16 {
            if let Ok(produce) = ProduceRequest::decode(&mut rest.clone(), version) {
                for partition in produce.topic_data.iter().flat_map(|t| &t.partition_data) {
                    if let Some(records) = &partition.records {
                        let codec = codec_of(records);
                        group = format!("{group}-{codec}");
                        let batches = groups.entry("record_batch").or_default();
                        keep(
                            batches,
                            format!("{codec}-{}", header.client_id.as_deref().unwrap_or("")),
                            records.to_vec(),
                        );
                    }
                }
            }
        }
        if key == ApiKey::SaslHandshake as i16 {
            if let Ok(handshake) = SaslHandshakeRequest::decode(&mut rest.clone(), version) {
                let selector = match handshake.mechanism.as_str() {
                    // `sasl::Mechanism::ALL` order; raw mode (bit 2 clear).
                    "SCRAM-SHA-256" => 1,
                    "SCRAM-SHA-512" => 2,
                    "OAUTHBEARER" => 3,
                    _ => 0,
                };
                sasl.insert(connection.clone(), (selector, vec![selector]));
            }
        }
        if key == ApiKey::SaslAuthenticate as i16 {
            if let (Some((_, tokens)), Ok(auth)) = (
                sasl.get_mut(&connection),
                SaslAuthenticateRequest::decode(&mut rest.clone(), version),
            ) {
                let len = u16::try_from(auth.auth_bytes.len()).unwrap_or(u16::MAX);
                tokens.extend_from_slice(&len.to_be_bytes());
                tokens.extend_from_slice(&auth.auth_bytes[..usize::from(len)]);
            }
        }
        keep(
            groups.entry("frame").or_default(),
            group.clone(),
            frame.clone(),
        );
        keep(
            groups.entry("request_header").or_default(),
            format!("{:?}-{}", header.client_id, header_len),
            body[..header_len].to_vec(),
        );
        let mut prefixed = prefix.to_vec();
        prefixed.extend_from_slice(&rest);
        keep(groups.entry("request_body").or_default(), group, prefixed);
    }
    for (connection, (_, tokens)) in sasl {
        keep(
            groups.entry("sasl").or_default(),
            format!("{:016x}-{connection}", fnv(&tokens)),
            tokens,
        );
    }

    for (target, cap) in CAPS {
        let dir = Path::new(out_dir).join(target);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut seen = std::collections::HashSet::new();
        let inputs: Vec<Vec<u8>> = groups
            .remove(target)
            .unwrap_or_default()
            .into_values()
            .filter(|input| seen.insert(input.clone()))
            .collect();
        // Over the cap: keep an even spread over the groups' order (key, version, codec).
        let step = inputs.len().div_ceil(cap).max(1);
        let kept: Vec<_> = inputs.iter().step_by(step).collect();
        for input in &kept {
            std::fs::write(dir.join(format!("{:016x}", fnv(input))), input)?;
        }
        println!(
            "{target}: {} inputs ({} distinct before the cap)",
            kept.len(),
            inputs.len()
        );
    }
    Ok(())
}
