//! What one API connection may hold (D25): a cap on the connections of one client address,
//! checked as each connection is accepted, and the connection's own state, which the
//! dispatcher reads (`Connection`).
//!
//! The global cap is actix's own (`HttpServer::max_connections`, per worker): a worker at its
//! cap stops accepting, so further clients wait in the listen backlog instead of taking file
//! descriptors the admin listener, the store and the log need. The cap per address keeps one
//! client from taking that whole global cap: a connection over it is shut down as soon as it
//! is accepted, before a byte of it is read, and counted
//! (`flowgate_http_connections_refused_total{reason="per_address"}`).
//!
//! Peers that are trusted proxies (`rate_limit.trusted_proxies`) are not capped per address:
//! every client of a load balancer arrives from its address, and the client behind it is known
//! only per request (`X-Forwarded-For`), after the connection was accepted.

use std::any::Any;
use std::cell::Cell;
use std::collections::HashMap;
use std::net::{IpAddr, Shutdown};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use actix_web::dev::Extensions;
use actix_web::rt::net::TcpStream;
use ipnet::IpNet;

use crate::metrics::HttpMetrics;

/// `server.max_connections_per_address` by default.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: u32 = 512;

/// The per-address cap, shared by every worker of the API listener.
#[derive(Debug)]
pub struct ConnectionLimits {
    per_address: u32,
    trusted_proxies: Vec<IpNet>,
    open: Mutex<HashMap<IpAddr, u32>>,
    /// Connections closed so far (for the memory release after many close).
    closed: AtomicU64,
    metrics: HttpMetrics,
}

impl ConnectionLimits {
    /// At most `per_address` open connections per client address (0: no cap), except from
    /// `trusted_proxies`; refusals are counted in `metrics`.
    pub fn new(per_address: u32, trusted_proxies: Vec<IpNet>, metrics: HttpMetrics) -> Arc<Self> {
        Arc::new(Self {
            per_address,
            trusted_proxies,
            open: Mutex::new(HashMap::new()),
            closed: AtomicU64::new(0),
            metrics,
        })
    }

    /// For `HttpServer::on_connect`: takes a slot of the peer's address for the life of the
    /// connection, or shuts the connection down when the address has no slot left. Either way
    /// the connection gets its `Connection` state.
    pub fn on_connect(self: &Arc<Self>, io: &dyn Any, extensions: &mut Extensions) {
        let mut connection = Connection {
            closing: Cell::new(false),
            limits: Some(Arc::clone(self)),
            address: None,
        };
        let peer = io
            .downcast_ref::<TcpStream>()
            .map(|stream| (stream, stream.peer_addr()));
        match peer {
            Some((_, Ok(peer))) if self.take_slot(peer.ip()) => {
                connection.address = self.is_capped(peer.ip()).then_some(peer.ip());
            }
            Some((stream, _)) => {
                // Over the cap (or already gone): the dispatcher reads end-of-stream and drops
                // the connection; the client sees it closed. Nothing was read or answered.
                self.metrics.connection_refused("per_address");
                let _ = socket2::SockRef::from(stream).shutdown(Shutdown::Both);
                connection.closing.set(true);
            }
            None => {}
        }
        extensions.insert(connection);
    }

    /// Whether connections of `ip` count against a cap.
    fn is_capped(&self, ip: IpAddr) -> bool {
        self.per_address > 0 && !self.trusted_proxies.iter().any(|net| net.contains(&ip))
    }

    /// Takes a slot of `ip` when it is capped; false when it has none left.
    fn take_slot(&self, ip: IpAddr) -> bool {
        if !self.is_capped(ip) {
            return true;
        }
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(ip).or_insert(0);
        if *count >= self.per_address {
            return false;
        }
        *count += 1;
        true
    }

    /// Gives a slot of `ip` back.
    fn release_slot(&self, ip: IpAddr) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&ip);
            }
        }
    }

    /// API connections closed since the start (refused ones included).
    pub fn closed(&self) -> u64 {
        self.closed.load(Ordering::Relaxed)
    }

    /// Open connections of `ip` counted against its cap.
    #[cfg(test)]
    fn open_from(&self, ip: IpAddr) -> u32 {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&ip)
            .copied()
            .unwrap_or(0)
    }
}

/// The state of one API connection, in its extensions (`HttpRequest::conn_data`); dropped
/// with the connection, when it gives its address's slot back.
#[derive(Debug, Default)]
pub(crate) struct Connection {
    /// A response on this connection said `Connection: close`, or the request asked for it:
    /// a request pipelined behind it is not processed (RFC 9112, 9.6), which actix's
    /// dispatcher would otherwise hand over.
    pub(crate) closing: Cell<bool>,
    limits: Option<Arc<ConnectionLimits>>,
    /// The address whose slot this connection holds.
    address: Option<IpAddr>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(limits) = &self.limits {
            if let Some(ip) = self.address {
                limits.release_slot(ip);
            }
            limits.closed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_its_slots_back_and_trusted_proxies_are_not_capped() {
        let limits = ConnectionLimits::new(
            2,
            vec!["10.0.0.0/8".parse().unwrap()],
            HttpMetrics::default(),
        );
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let held = |ip: IpAddr| {
            assert!(limits.take_slot(ip));
            Connection {
                closing: Cell::new(false),
                limits: Some(Arc::clone(&limits)),
                address: limits.is_capped(ip).then_some(ip),
            }
        };
        let a = held(ip);
        let b = held(ip);
        assert!(!limits.take_slot(ip), "the third is over the cap");
        assert!(
            limits.take_slot("192.0.2.2".parse().unwrap()),
            "another address has its own"
        );
        assert_eq!(limits.open_from(ip), 2);
        drop(a);
        assert_eq!(limits.open_from(ip), 1);
        let c = held(ip);
        drop((b, c));
        assert_eq!(limits.open_from(ip), 0);
        assert_eq!(limits.closed(), 3);
        let proxy: IpAddr = "10.1.2.3".parse().unwrap();
        for _ in 0..10 {
            assert!(limits.take_slot(proxy));
        }
        assert_eq!(
            limits.open_from(proxy),
            0,
            "trusted proxies are not counted"
        );
        let unlimited = ConnectionLimits::new(0, Vec::new(), HttpMetrics::default());
        assert!(unlimited.take_slot(ip));
    }
}
