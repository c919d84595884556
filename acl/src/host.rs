//! The client address as Kafka's ACLs name it: Java's `InetAddress.getHostAddress()`. An ACL's
//! host is compared as a string, so the broker must print addresses the way the Java broker
//! does or an ACL written for Kafka would never match. Allocates one short string; call it
//! once per connection, not per request.

use std::net::{IpAddr, Ipv6Addr};

/// Java's `getHostAddress()` for a peer's address: IPv4 dotted (`10.0.0.1`); IPv6 as eight
/// lower-case hex groups with no zero compression (`0:0:0:0:0:0:0:1`, never `::1`); and an
/// IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, what a dual-stack socket reports for an IPv4
/// client) as its IPv4 address, since Java hands those over as `Inet4Address`.
pub fn java_host_address(address: IpAddr) -> String {
    match address {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => java_ipv6(&v6),
        },
    }
}

fn java_ipv6(address: &Ipv6Addr) -> String {
    let groups: Vec<String> = address
        .segments()
        .iter()
        .map(|g| format!("{g:x}"))
        .collect();
    groups.join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_java_does() {
        let cases = [
            ("127.0.0.1", "127.0.0.1"),
            ("::1", "0:0:0:0:0:0:0:1"),
            ("fe80::1:2:3:4", "fe80:0:0:0:1:2:3:4"),
            ("2001:DB8::ABCD", "2001:db8:0:0:0:0:0:abcd"),
            ("::ffff:192.168.1.1", "192.168.1.1"),
            ("::", "0:0:0:0:0:0:0:0"),
        ];
        for (text, java) in cases {
            let address: IpAddr = text.parse().unwrap();
            assert_eq!(java_host_address(address), java, "{text}");
        }
    }
}
