//! The consistent-hash ring behind `RingHash` (ketama style). Each endpoint owns points placed
//! by hashing its address and the point's number, so an endpoint's points never depend on the
//! other endpoints: when one leaves, only the keys on its arcs move, and a weight change only
//! adds or removes that endpoint's own points. The hash is our own (FNV-1a with a murmur3
//! finaliser), fixed forever, so every sidecar maps a key to the same endpoint.

use std::fmt;
use std::net::SocketAddr;

/// Points per unit of effective weight when the ring is small enough.
const POINTS_PER_WEIGHT: f64 = 160.0;

/// Upper bound on the ring's size (memory and rebuild time with thousands of endpoints); above
/// it every endpoint's point count is scaled down alike.
const MAX_POINTS: f64 = 65_536.0;

/// A ring of `(position, candidate index)` sorted by position.
pub(crate) struct Ring {
    points: Vec<(u64, u32)>,
}

// === impl Ring ===

impl Ring {
    /// Build over endpoints given as `(address, effective weight)`, in candidate order.
    pub(crate) fn new(endpoints: &[(SocketAddr, f64)]) -> Self {
        let wanted: f64 = endpoints.iter().map(|(_, w)| w * POINTS_PER_WEIGHT).sum();
        let scale = if wanted > MAX_POINTS {
            MAX_POINTS / wanted
        } else {
            1.0
        };
        let mut points = Vec::new();
        for (index, (addr, weight)) in endpoints.iter().enumerate() {
            let Ok(index) = u32::try_from(index) else {
                break;
            };
            let count = (weight * POINTS_PER_WEIGHT * scale).round().max(1.0) as u32;
            points.extend((0..count).map(|n| (point_hash(*addr, n), index)));
        }
        points.sort_unstable();
        Self { points }
    }

    /// Candidate indices in ring order starting at the owner of `key_hash`, once around the
    /// ring (an endpoint appears once per point it owns).
    pub(crate) fn walk(&self, key_hash: u64) -> impl Iterator<Item = usize> + '_ {
        let start = self.points.partition_point(|&(pos, _)| pos < key_hash);
        let (wrapped, from_owner) = self.points.split_at(start);
        from_owner
            .iter()
            .chain(wrapped)
            .map(|&(_, index)| index as usize)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.points.len()
    }
}

impl fmt::Debug for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Tens of thousands of points say nothing in a log line.
        f.debug_struct("Ring")
            .field("points", &self.points.len())
            .finish()
    }
}

/// Where a request key lands on the ring.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    fmix64(fnv1a(FNV_OFFSET, key))
}

/// Where point `n` of the endpoint at `addr` sits.
fn point_hash(addr: SocketAddr, n: u32) -> u64 {
    let mut h = FNV_OFFSET;
    match addr {
        SocketAddr::V4(a) => h = fnv1a(h, &a.ip().octets()),
        SocketAddr::V6(a) => h = fnv1a(h, &a.ip().octets()),
    }
    h = fnv1a(h, &addr.port().to_be_bytes());
    h = fnv1a(h, &n.to_be_bytes());
    fmix64(h)
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// murmur3's 64-bit finaliser: spreads FNV's weak low-entropy output over the whole ring.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

#[cfg(test)]
mod tests;
