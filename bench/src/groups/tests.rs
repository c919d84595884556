//! Unit tests of `bench groups`: `/proc` status parsing and the consumer-protocol blobs.

use super::memory::status_kb;
use super::protocol::{empty_assignment, subscription};
use super::SUBSCRIBED_TOPIC;

#[test]
fn vm_rss_is_read_in_bytes() {
    let status = "Name:\tbroker\nVmPeak:\t  200 kB\nVmRSS:\t   1234 kB\nThreads:\t3\n";
    assert_eq!(status_kb(status, "VmRSS:"), Some(1234 * 1024));
    assert_eq!(status_kb("Name:\tx\n", "VmRSS:"), None);
}

#[test]
fn consumer_protocol_blobs() {
    // version 0, one topic "bench-groups", null user data
    let s = subscription();
    assert_eq!(&s[..6], &[0, 0, 0, 0, 0, 1]);
    assert_eq!(&s[6..8], &(SUBSCRIBED_TOPIC.len() as i16).to_be_bytes());
    assert_eq!(&s[s.len() - 4..], &[0xff; 4]);
    assert_eq!(
        &empty_assignment()[..],
        &[0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
    );
}
