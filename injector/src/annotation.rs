//! The `rollcall.dev/pools` annotation: which pools a pod routes to, and on which local port
//! its application sends to each. `shop/checkout=15001,cart=15002` reads as pool
//! `shop/checkout` on 127.0.0.1:15001 and pool `<pod namespace>/cart` on 127.0.0.1:15002.
//! Anything else is refused with a message that names the entry and says how to write it.

use std::collections::BTreeSet;
use std::fmt;

/// The annotation that asks for the sidecar.
pub const POOLS: &str = "rollcall.dev/pools";

/// The annotation that gives the sidecar more threads than its default one (`--threads`).
pub const THREADS: &str = "rollcall.dev/sidecar-threads";

/// The most threads the annotation may ask for.
const MAX_THREADS: u16 = 64;

/// The annotation that sets how many idle keep-alive connections each of the sidecar's pools
/// keeps (`--max-idle-connections`; the sidecar's default is 1024).
pub const MAX_IDLE_CONNECTIONS: &str = "rollcall.dev/sidecar-max-idle-connections";

/// The largest idle-connection budget the annotation may ask for (about 38 KB each).
const MAX_IDLE_LIMIT: u32 = 100_000;

/// The annotation that picks what serves the application's HTTP/1 connections to the sidecar
/// (`--http1-engine`: `fast`, the sidecar's own and its default, or `hyper`).
pub const HTTP1_ENGINE: &str = "rollcall.dev/sidecar-http1-engine";

/// What a pod's annotations ask of its sidecar beyond its pools.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SidecarOptions {
    /// `--threads`, from `rollcall.dev/sidecar-threads`.
    pub threads: Option<u16>,
    /// `--max-idle-connections`, from `rollcall.dev/sidecar-max-idle-connections`.
    pub max_idle_connections: Option<u32>,
    /// `--http1-engine`, from `rollcall.dev/sidecar-http1-engine`.
    pub http1_engine: Option<&'static str>,
}

/// How one entry is written, for error messages.
const FORM: &str = "write POOL-NAMESPACE/POOL-NAME=LOCAL-PORT (or POOL-NAME=LOCAL-PORT for a pool in the pod's namespace), comma separated, e.g. shop/checkout=15001";

/// One pool the pod routes to, and the local port its listener takes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PoolPort {
    pub namespace: String,
    pub name: String,
    pub port: u16,
}

impl fmt::Display for PoolPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}={}", self.namespace, self.name, self.port)
    }
}

/// Whether `s` is a DNS label (RFC 1123): what a namespace name must be.
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is a DNS subdomain (RFC 1123): what a BackendPool's name must be.
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn entry(index: usize, raw: &str, pod_namespace: &str) -> Result<PoolPort, String> {
    let problem = |what: String| format!("{POOLS}: entry {} ({raw:?}): {what}; {FORM}", index + 1);
    let (pool, port) = raw
        .split_once('=')
        .ok_or_else(|| problem("no local port (=PORT)".into()))?;
    let (namespace, name) = match pool.trim().split_once('/') {
        Some((ns, name)) => (ns.trim(), name.trim()),
        None => (pod_namespace, pool.trim()),
    };
    if !is_dns_label(namespace) {
        return Err(problem(format!(
            "{namespace:?} is not a namespace name (lowercase letters, digits and '-', at most 63)"
        )));
    }
    if !is_dns_subdomain(name) {
        return Err(problem(format!(
            "{name:?} is not a BackendPool name (lowercase letters, digits, '-' and '.')"
        )));
    }
    let port = port.trim();
    let number = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p > 0 && port.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            problem(format!(
                "the local port must be a number from 1 to 65535, got {port:?}"
            ))
        })?;
    Ok(PoolPort {
        namespace: namespace.to_string(),
        name: name.to_string(),
        port: number,
    })
}

/// Parse the annotation's value; `pod_namespace` completes entries that name no namespace.
pub fn parse(value: &str, pod_namespace: &str) -> Result<Vec<PoolPort>, String> {
    if value.trim().is_empty() {
        return Err(format!("{POOLS} is empty; {FORM}"));
    }
    let mut pools = Vec::new();
    let mut seen_pools = BTreeSet::new();
    let mut seen_ports = BTreeSet::new();
    for (index, raw) in value.split(',').enumerate() {
        if raw.trim().is_empty() {
            return Err(format!("{POOLS}: entry {} is empty; {FORM}", index + 1));
        }
        let pool = entry(index, raw.trim(), pod_namespace)?;
        if !seen_pools.insert((pool.namespace.clone(), pool.name.clone())) {
            return Err(format!(
                "{POOLS}: pool {}/{} is named twice; one local port per pool",
                pool.namespace, pool.name
            ));
        }
        if !seen_ports.insert(pool.port) {
            return Err(format!(
                "{POOLS}: local port {} is given to two pools; each pool needs its own",
                pool.port
            ));
        }
        pools.push(pool);
    }
    Ok(pools)
}

/// Parse the sidecar-threads annotation: a whole number from 1 to 64.
pub fn parse_threads(value: &str) -> Result<u16, String> {
    whole_number(value, MAX_THREADS.into())
        .and_then(|n| u16::try_from(n).ok())
        .ok_or_else(|| {
            format!(
                "{THREADS}: {:?} is not a thread count; write a whole number from 1 to \
                 {MAX_THREADS}, e.g. \"2\" (without it the sidecar runs one thread; more pay only \
                 when the sidecar has cores of its own)",
                value.trim()
            )
        })
}

/// Parse the sidecar-max-idle-connections annotation: a whole number from 1 to 100,000.
pub fn parse_max_idle_connections(value: &str) -> Result<u32, String> {
    whole_number(value, MAX_IDLE_LIMIT).ok_or_else(|| {
        format!(
            "{MAX_IDLE_CONNECTIONS}: {:?} is not a connection count; write a whole number from 1 \
             to {MAX_IDLE_LIMIT}, e.g. \"4096\" (idle keep-alive connections each pool keeps, \
             about 38 KB each; without it 1024)",
            value.trim()
        )
    })
}

/// Parse the sidecar-http1-engine annotation: `fast` or `hyper`.
pub fn parse_http1_engine(value: &str) -> Result<&'static str, String> {
    match value.trim() {
        "fast" => Ok("fast"),
        "hyper" => Ok("hyper"),
        other => Err(format!(
            "{HTTP1_ENGINE}: {other:?} is not an engine; write \"fast\" (the sidecar's own \
             HTTP/1 engine, the default) or \"hyper\" (hyper's server)"
        )),
    }
}

/// `value` (spaces around it aside) as a number from 1 to `max`, digits only: no sign, no
/// fraction, no exponent.
fn whole_number(value: &str, max: u32) -> Option<u32> {
    let value = value.trim();
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse::<u32>().ok().filter(|n| (1..=max).contains(n))
}

#[cfg(test)]
mod tests;
