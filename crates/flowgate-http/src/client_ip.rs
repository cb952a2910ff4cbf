//! The client address for per-IP rate limiting (D10): the socket peer, or, when the peer is a
//! configured trusted proxy, the nearest untrusted hop of `X-Forwarded-For`.

use std::net::IpAddr;

use ipnet::IpNet;

/// Finds the client address. `forwarded_for` holds every `X-Forwarded-For` header value in
/// order. The chain is read right to left (the hops nearest to us first) and trusted proxies are
/// skipped, so a client cannot spoof its address by prepending entries; an unparseable entry
/// ends the walk at the last address known to be real.
pub fn client_ip(
    peer: Option<IpAddr>,
    forwarded_for: &[&str],
    trusted: &[IpNet],
) -> Option<IpAddr> {
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|net| net.contains(ip));
    let mut current = peer?;
    if !is_trusted(&current) {
        return Some(current);
    }
    let hops = forwarded_for
        .iter()
        .flat_map(|h| h.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let hops: Vec<&str> = hops.collect();
    for hop in hops.iter().rev() {
        match hop.parse::<IpAddr>() {
            Ok(ip) => {
                current = ip;
                if !is_trusted(&ip) {
                    return Some(ip);
                }
            }
            Err(_) => return Some(current),
        }
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    #[test]
    fn untrusted_peer_is_the_client_whatever_the_header_says() {
        assert_eq!(
            client_ip(
                Some(ip("203.0.113.9")),
                &["1.2.3.4"],
                &nets(&["10.0.0.0/8"])
            ),
            Some(ip("203.0.113.9"))
        );
    }

    #[test]
    fn trusted_proxy_chain_yields_the_nearest_untrusted_hop() {
        let trusted = nets(&["10.0.0.0/8", "192.168.1.1/32"]);
        // spoofed, real client, inner proxy
        let xff = ["6.6.6.6, 198.51.100.7, 10.1.2.3"];
        assert_eq!(
            client_ip(Some(ip("192.168.1.1")), &xff, &trusted),
            Some(ip("198.51.100.7"))
        );
        // several header lines are one list
        assert_eq!(
            client_ip(
                Some(ip("10.0.0.1")),
                &["198.51.100.7", "10.0.0.2"],
                &trusted
            ),
            Some(ip("198.51.100.7"))
        );
    }

    #[test]
    fn garbage_or_missing_header_falls_back() {
        let trusted = nets(&["10.0.0.0/8"]);
        assert_eq!(
            client_ip(Some(ip("10.0.0.1")), &[], &trusted),
            Some(ip("10.0.0.1"))
        );
        assert_eq!(
            client_ip(Some(ip("10.0.0.1")), &["nonsense, 10.0.0.5"], &trusted),
            Some(ip("10.0.0.5"))
        );
        assert_eq!(
            client_ip(Some(ip("10.0.0.1")), &["2001:db8::1"], &trusted),
            Some(ip("2001:db8::1"))
        );
        assert_eq!(client_ip(None, &["1.1.1.1"], &trusted), None);
    }
}
