//! The numbers that bound HTTP connections: slots, the reserve, and one
//! address's share. `connections.rs` enforces them and `over_share.rs` names
//! the share in its refusal.
//!
//! Constants only; nothing here counts or accepts.

/// HTTP connections open at once, over every listener.
pub const MAX_CONNECTIONS: usize = 64;

/// Connections for `/healthz`, `/readyz` and `/metrics` when every slot is
/// taken.
pub const RESERVE_CONNECTIONS: usize = 8;

/// Connections one client address may hold at once.
pub const MAX_PER_CLIENT: usize = 8;
