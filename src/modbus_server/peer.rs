//! Who a request came from: a TCP client (its address and port) or the
//! master on the serial line. The per-client bounds key on its [`Host`];
//! logs and the steering history name it by its `Display`.
//!
//! Plain values; nothing here reads a socket or a port.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// A request's sender.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peer {
    Tcp(SocketAddr),
    /// The master on the serial line at this path.
    Serial(Arc<str>),
}

/// What the bounds per client count by: a TCP client's address (all its
/// connections together), or the serial line (its one master).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Host {
    Ip(IpAddr),
    Serial(Arc<str>),
}

impl Peer {
    pub fn host(&self) -> Host {
        match self {
            Peer::Tcp(a) => Host::Ip(a.ip()),
            Peer::Serial(p) => Host::Serial(p.clone()),
        }
    }
}

impl fmt::Display for Peer {
    /// `192.168.1.20:50123`, `[::1]:50123`, or `serial:/dev/ttyUSB1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Tcp(a) => write!(f, "{a}"),
            Peer::Serial(p) => write!(f, "serial:{p}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_name_themselves_and_share_a_host_by_address() {
        let a = Peer::Tcp("127.0.0.1:5000".parse().unwrap());
        let b = Peer::Tcp("127.0.0.1:5001".parse().unwrap());
        let s = Peer::Serial("/dev/ttyUSB1".into());
        assert_eq!(a.to_string(), "127.0.0.1:5000");
        assert_eq!(s.to_string(), "serial:/dev/ttyUSB1");
        assert_eq!(a.host(), b.host());
        assert_ne!(a.host(), s.host());
    }
}
