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
            metrics,
        })
    }

    /// For `HttpServer::on_connect`: takes a slot of the peer's address for the life of the
    /// connection, or shuts the connection down when the address has no slot left. Either way
    /// the connection gets its [`Connection`] state.
    pub fn on_connect(self: &Arc<Self>, io: &dyn Any, extensions: &mut Extensions) {
        let Some(stream) = io.downcast_ref::<TcpStream>() else {
            extensions.insert(Connection::default());
            return;
        };
        let slot = match stream.peer_addr() {
            Ok(peer) => self.take_slot(peer.ip()),
            // No peer: the connection is already gone.
            Err(_) => Err(()),
        };
        match slot {
            Ok(slot) => {
                extensions.insert(Connection {
                    closing: Cell::new(false),
                    _slot: slot,
                });
            }
            Err(()) => {
                self.metrics.connection_refused("per_address");
                // The dispatcher then reads end-of-stream and drops the connection; the
                // client sees it closed. Nothing was read, nothing is answered.
                let _ = socket2::SockRef::from(stream).shutdown(Shutdown::Both);
                extensions.insert(Connection {
                    closing: Cell::new(true),
                    _slot: None,
                });
            }
        }
    }

    /// A slot of `ip`: `Ok(None)` when `ip` is not capped, `Err` when it has none left.
    fn take_slot(self: &Arc<Self>, ip: IpAddr) -> Result<Option<AddressSlot>, ()> {
        if self.per_address == 0 || self.trusted_proxies.iter().any(|net| net.contains(&ip)) {
            return Ok(None);
        }
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(ip).or_insert(0);
        if *count >= self.per_address {
            return Err(());
        }
        *count += 1;
        Ok(Some(AddressSlot {
            limits: Arc::clone(self),
            ip,
        }))
    }

    /// Open connections of `ip` counted against its cap.
    pub fn open_from(&self, ip: IpAddr) -> u32 {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&ip)
            .copied()
            .unwrap_or(0)
    }
}

/// One connection's place in its address's count, given back when the connection is dropped.
#[derive(Debug)]
struct AddressSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self
            .limits
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// The state of one API connection, in its extensions (`HttpRequest::conn_data`).
#[derive(Debug, Default)]
pub(crate) struct Connection {
    /// A response on this connection said `Connection: close`, or the request asked for it:
    /// a request pipelined behind it is not processed (RFC 9112, 9.6), which actix's
    /// dispatcher would otherwise hand over.
    pub(crate) closing: Cell<bool>,
    _slot: Option<AddressSlot>,
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
        let a = limits.take_slot(ip).unwrap();
        let b = limits.take_slot(ip).unwrap();
        assert!(limits.take_slot(ip).is_err(), "the third is over the cap");
        assert!(
            limits.take_slot("192.0.2.2".parse().unwrap()).is_ok(),
            "another address has its own"
        );
        assert_eq!(limits.open_from(ip), 2);
        drop(a);
        assert_eq!(limits.open_from(ip), 1);
        let c = limits.take_slot(ip).unwrap();
        assert!(c.is_some());
        drop((b, c));
        assert_eq!(limits.open_from(ip), 0);
        for _ in 0..10 {
            assert!(limits
                .take_slot("10.1.2.3".parse().unwrap())
                .unwrap()
                .is_none());
        }
        let unlimited = ConnectionLimits::new(0, Vec::new(), HttpMetrics::default());
        assert!(unlimited.take_slot(ip).unwrap().is_none());
    }
}
