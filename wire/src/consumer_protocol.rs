//! The classic consumer protocol's byte blobs a group member exchanges through JoinGroup and
//! SyncGroup (Kafka's ConsumerProtocolSubscription and ConsumerProtocolAssignment: written as
//! v0, read at every version), and Kafka's RangeAssignor, which the group's leader runs for every member.

use std::collections::BTreeMap;

/// The subscription and assignment version written: v0 has topics (and partitions) and a
/// null user data, which every coordinator and consumer reads.
const VERSION: i16 = 0;
/// A null `bytes` field (the user data nobody here sets).
const NULL_BYTES: i32 = -1;

fn put_string(out: &mut Vec<u8>, s: &str) {
    // Topic names are at most 249 bytes, so the i16 length cannot overflow.
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// ConsumerProtocolSubscription v0 for `topics`.
pub fn encode_subscription(topics: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        put_string(&mut out, t);
    }
    out.extend_from_slice(&NULL_BYTES.to_be_bytes());
    out
}

/// ConsumerProtocolAssignment v0 for `(topic, partitions)` pairs.
pub fn encode_assignment(assigned: &[(String, Vec<i32>)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&(assigned.len() as i32).to_be_bytes());
    for (topic, partitions) in assigned {
        put_string(&mut out, topic);
        out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
        for p in partitions {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&NULL_BYTES.to_be_bytes());
    out
}

/// Kafka's RangeAssignor: per topic, its subscribers in member id order each get a
/// contiguous range of its partitions, `n / m` of them, the first `n % m` one more.
/// `subscriptions` is `(member id, topics)`; `partition_counts` the number of partitions of
/// each topic (a topic missing there is assigned to nobody). Every member gets an entry,
/// possibly empty, as SyncGroup needs one per member.
pub fn range_assign(
    subscriptions: &[(String, Vec<String>)],
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Vec<(String, Vec<i32>)>> {
    let mut out: BTreeMap<String, Vec<(String, Vec<i32>)>> = subscriptions
        .iter()
        .map(|(member, _)| (member.clone(), Vec::new()))
        .collect();
    for (topic, &count) in partition_counts {
        let mut members: Vec<&str> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(m, _)| m.as_str())
            .collect();
        members.sort_unstable();
        members.dedup();
        if members.is_empty() || count <= 0 {
            continue;
        }
        let m = members.len() as i32;
        let (per, extra) = (count / m, count % m);
        for (i, member) in members.iter().enumerate() {
            let i = i as i32;
            let start = i * per + i.min(extra);
            let len = per + i32::from(i < extra);
            if len > 0 {
                out.get_mut(*member)
                    .expect("every subscriber has an entry")
                    .push((topic.clone(), (start..start + len).collect()));
            }
        }
    }
    out
}

/// Decodes a classic consumer's assignment (Kafka's ConsumerProtocolAssignment, every
/// version: i16 version, then topics, each a string and an array of i32 partitions, then
/// user data). `None` for bytes that are not one.
pub fn decode_assignment(buf: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    struct Cursor<'a>(&'a [u8]);
    impl Cursor<'_> {
        fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
            let (head, rest) = self.0.split_first_chunk::<N>()?;
            self.0 = rest;
            Some(*head)
        }
    }
    let mut c = Cursor(buf);
    if buf.is_empty() {
        return Some(Vec::new());
    }
    let version = i16::from_be_bytes(c.take::<2>()?);
    if version < 0 {
        return None;
    }
    let topics = i32::from_be_bytes(c.take::<4>()?);
    // Each topic takes at least 6 bytes, so a count the buffer cannot hold is garbage.
    if topics < 0 || topics as usize > c.0.len() / 6 {
        return None;
    }
    let mut out = Vec::with_capacity(topics as usize);
    for _ in 0..topics {
        let len = i16::from_be_bytes(c.take::<2>()?);
        let len = usize::try_from(len).ok()?;
        if c.0.len() < len {
            return None;
        }
        let (name, rest) = c.0.split_at(len);
        c.0 = rest;
        let name = String::from_utf8(name.to_vec()).ok()?;
        let n = i32::from_be_bytes(c.take::<4>()?);
        if n < 0 || n as usize > c.0.len() / 4 {
            return None;
        }
        let mut partitions = Vec::with_capacity(n as usize);
        for _ in 0..n {
            partitions.push(i32::from_be_bytes(c.take::<4>()?));
        }
        out.push((name, partitions));
    }
    Some(out)
}

/// Decoded `(member id -> (topic, partitions))` is not needed by the coordinator; what it
/// needs from the consumer protocol is only which topics members subscribe to (OffsetDelete's
/// GROUP_SUBSCRIBED_TO_TOPIC). Kafka's ConsumerProtocolSubscription: version i16, topics
/// array of strings, then fields we do not read.
pub fn subscribed_topics(subscription: &[u8]) -> Vec<String> {
    fn read_i16(buf: &[u8], at: &mut usize) -> Option<i16> {
        let bytes = buf.get(*at..*at + 2)?;
        *at += 2;
        Some(i16::from_be_bytes([bytes[0], bytes[1]]))
    }
    let mut at = 0;
    let mut topics = Vec::new();
    let Some(_version) = read_i16(subscription, &mut at) else {
        return topics;
    };
    let Some(count) = subscription.get(at..at + 4) else {
        return topics;
    };
    let count = i32::from_be_bytes([count[0], count[1], count[2], count[3]]);
    at += 4;
    for _ in 0..count.clamp(0, 100_000) {
        let Some(len) = read_i16(subscription, &mut at) else {
            break;
        };
        let Some(name) = subscription.get(at..at + len.max(0) as usize) else {
            break;
        };
        at += len.max(0) as usize;
        topics.push(String::from_utf8_lossy(name).into_owned());
    }
    topics
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(list: &[(&str, &[&str])]) -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|(m, ts)| {
                (
                    (*m).to_owned(),
                    ts.iter().map(|t| (*t).to_owned()).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn range_gives_contiguous_ranges_and_the_remainder_to_the_first_members() {
        let counts = BTreeMap::from([("a".to_owned(), 7), ("b".to_owned(), 2)]);
        let got = range_assign(
            &subs(&[("m2", &["a"]), ("m1", &["a", "b"]), ("m3", &["a", "b"])]),
            &counts,
        );
        let a = |m: &str| {
            got[m]
                .iter()
                .find(|(t, _)| t == "a")
                .map(|(_, p)| p.clone())
        };
        let b = |m: &str| {
            got[m]
                .iter()
                .find(|(t, _)| t == "b")
                .map(|(_, p)| p.clone())
        };
        assert_eq!(a("m1"), Some(vec![0, 1, 2]));
        assert_eq!(a("m2"), Some(vec![3, 4]));
        assert_eq!(a("m3"), Some(vec![5, 6]));
        assert_eq!(b("m1"), Some(vec![0]));
        assert_eq!(b("m2"), None);
        assert_eq!(b("m3"), Some(vec![1]));
        // A lone member takes everything; more members than partitions leaves some empty.
        let one = BTreeMap::from([("t".to_owned(), 3)]);
        assert_eq!(
            range_assign(&subs(&[("x", &["t"])]), &one)["x"],
            vec![("t".to_owned(), vec![0, 1, 2])]
        );
        let many = range_assign(
            &subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"]), ("d", &["t"])]),
            &one,
        );
        assert!(many["d"].is_empty());
        assert_eq!(many["c"], vec![("t".to_owned(), vec![2])]);
        // An unknown topic is assigned to nobody, yet the member gets an (empty) entry.
        assert!(range_assign(&subs(&[("x", &["gone"])]), &one)["x"].is_empty());
    }

    #[test]
    fn blobs_are_kafkas_v0_layout_and_read_back() {
        let sub = encode_subscription(&["ab".to_owned()]);
        assert_eq!(
            sub,
            [0, 0, 0, 0, 0, 1, 0, 2, b'a', b'b', 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(subscribed_topics(&sub), ["ab"]);
        let assigned = vec![("t".to_owned(), vec![0, 2]), ("u".to_owned(), vec![])];
        let blob = encode_assignment(&assigned);
        assert_eq!(
            blob[..17],
            [0, 0, 0, 0, 0, 2, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0]
        );
        assert_eq!(blob[blob.len() - 4..], [0xff; 4]);
        assert_eq!(decode_assignment(&blob), Some(assigned));
        assert_eq!(decode_assignment(&encode_assignment(&[])), Some(vec![]));
    }

    #[test]
    fn classic_assignments_decode_and_garbage_does_not() {
        // version 1, [("orders", [0, 2]), ("x", [])], user data null.
        let mut buf = vec![0, 1, 0, 0, 0, 2];
        buf.extend_from_slice(&[0, 6]);
        buf.extend_from_slice(b"orders");
        buf.extend_from_slice(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2]);
        buf.extend_from_slice(&[0, 1, b'x', 0, 0, 0, 0]);
        buf.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            decode_assignment(&buf).unwrap(),
            vec![("orders".to_owned(), vec![0, 2]), ("x".to_owned(), vec![])]
        );
        assert_eq!(decode_assignment(&[]).unwrap(), vec![]);
        assert!(decode_assignment(&[0, 1, 0x7f, 0xff, 0xff, 0xff]).is_none());
        assert!(decode_assignment(&buf[..9]).is_none());
    }
}
