//! The three proxies' configurations, in one place so the settings that must match do match:
//! the same backends (3, or 4 for one scenario), least-outstanding-requests balancing (round
//! robin for one scenario), 2 tries per request on another backend for connect failures,
//! resets, per-try timeouts and 502/503/504 (500 too for one scenario), a 1 s connect timeout
//! and a 1 s per-try (read) timeout, and health checks `GET /healthz` every 500 ms with
//! a 250 ms timeout, 3 failures to go down and 2 successes to come back where the proxy has
//! active checks (nginx open source has none).

use std::net::SocketAddr;
use std::path::Path;

/// How a scenario's proxies balance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Balance {
    #[default]
    LeastRequest,
    RoundRobin,
}

/// What a scenario sets differently in all three proxies alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub balance: Balance,
    /// rollcall's algorithm where the others balance by least requests, when not its default
    /// (`--rollcall-algorithm`, to compare its balancers against the same HAProxy and nginx).
    pub rollcall_algorithm: Option<&'static str>,
    /// Retry a 500 too (on another backend, idempotent requests only where the proxy knows
    /// the difference): for a scenario whose backend fails with 500s.
    pub retry_500: bool,
}

/// rollcall's balancers that `--rollcall-algorithm` may name.
pub const ROLLCALL_ALGORITHMS: [&str; 2] = ["LeastRequest", "PeakEwma"];

/// rollcall-sidecar: HTTP probes like HAProxy's, the per-try timeout shared by all three,
/// everything else at its defaults (least request, 2 attempts, retry on connect failure, reset,
/// 502/503/504, consecutive gateway errors 3, consecutive 5xx 5, error rate 20%/10s/20,
/// base ejection 30 s, max ejection 50%, panic below 50%).
pub fn rollcall_yaml(listen: SocketAddr, backends: &[SocketAddr], shape: Shape) -> String {
    let mut yaml = format!("pools:\n- name: bench\n  listen: \"{listen}\"\n  endpoints:\n");
    for addr in backends {
        yaml.push_str(&format!(
            "  - {{address: \"{addr}\", zone: a, weight: 1, terminating: false}}\n"
        ));
    }
    yaml.push_str(concat!(
        "  policy:\n",
        "    healthCheck: {type: HTTP, path: /healthz, interval: 500ms, timeout: 250ms,\n",
        "                  healthyThreshold: 2, unhealthyThreshold: 3}\n",
        "    timeouts: {connect: 1s}\n",
    ));
    yaml.push_str(if shape.retry_500 {
        "    retries: {attempts: 2, perTryTimeout: 1s,\n              retryOn: [connect-failure, reset, \"500\", \"502\", \"503\", \"504\"]}\n"
    } else {
        "    retries: {attempts: 2, perTryTimeout: 1s}\n"
    });
    match (shape.balance, shape.rollcall_algorithm) {
        (Balance::RoundRobin, _) => yaml.push_str("    loadBalancer: {algorithm: RoundRobin}\n"),
        (Balance::LeastRequest, Some(algorithm)) => {
            yaml.push_str(&format!("    loadBalancer: {{algorithm: {algorithm}}}\n"));
        }
        (Balance::LeastRequest, None) => {}
    }
    yaml
}

/// HAProxy 2.6: active HTTP checks at the same interval, passive checks (`observe layer7`,
/// 3 consecutive errors mark the server down, like rollcall's consecutive gateway errors), one
/// retry (2 tries, like rollcall) on another server for the same conditions rollcall retries.
pub fn haproxy_cfg(
    listen: SocketAddr,
    stats: SocketAddr,
    backends: &[SocketAddr],
    shape: Shape,
) -> String {
    let algorithm = match shape.balance {
        Balance::LeastRequest => "leastconn",
        Balance::RoundRobin => "roundrobin",
    };
    let retry_500 = if shape.retry_500 { " 500" } else { "" };
    let mut cfg = format!(
        "global
    maxconn 4096
defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 1s
    timeout check 250ms
    option http-keep-alive
    http-reuse always
    retries 1
    option redispatch 1
    retry-on conn-failure empty-response junk-response response-timeout{retry_500} 502 503 504
frontend stats
    bind {stats}
    stats enable
    stats uri /stats
    stats refresh 1s
frontend bench
    bind {listen}
    default_backend backends
backend backends
    balance {algorithm}
    option httpchk GET /healthz
    default-server check inter 500ms fall 3 rise 2 observe layer7 error-limit 3 on-error mark-down
"
    );
    for (i, addr) in backends.iter().enumerate() {
        cfg.push_str(&format!("    server b{} {addr}\n", i + 1));
    }
    cfg
}

/// nginx 1.22 (open source: no active checks): passive `max_fails=3 fail_timeout=5s`, the next
/// upstream on the same conditions, 2 tries, the same connect and per-try read timeouts.
pub fn nginx_conf(listen: SocketAddr, dir: &Path, backends: &[SocketAddr], shape: Shape) -> String {
    let d = dir.display();
    // nginx balances round robin unless told otherwise.
    let retry_500 = if shape.retry_500 { " http_500" } else { "" };
    let algorithm = match shape.balance {
        Balance::LeastRequest => "        least_conn;\n",
        Balance::RoundRobin => "",
    };
    let servers: String = backends
        .iter()
        .map(|a| format!("        server {a} max_fails=3 fail_timeout=5s;\n"))
        .collect();
    format!(
        "worker_processes auto;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    upstream backends {{
{algorithm}{servers}        keepalive 64;
    }}
    server {{
        listen {listen};
        location / {{
            proxy_pass http://backends;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_connect_timeout 1s;
            proxy_read_timeout 1s;
            proxy_next_upstream error timeout{retry_500} http_502 http_503 http_504;
            proxy_next_upstream_tries 2;
        }}
    }}
}}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_share_the_timeouts() {
        let (l, s) = (
            "127.0.0.1:1".parse().expect("a"),
            "127.0.0.1:2".parse().expect("a"),
        );
        let b = ["127.0.0.1:3".parse().expect("a")];
        let lr = Shape::default();
        assert!(rollcall_yaml(l, &b, lr).contains("perTryTimeout: 1s"));
        assert!(haproxy_cfg(l, s, &b, lr).contains("timeout server 1s"));
        assert!(nginx_conf(l, Path::new("/tmp"), &b, lr).contains("proxy_read_timeout 1s"));
    }

    #[test]
    fn a_scenario_shape_is_asked_of_all_three() {
        let (l, s) = (
            "127.0.0.1:1".parse().expect("a"),
            "127.0.0.1:2".parse().expect("a"),
        );
        let b = ["127.0.0.1:3".parse().expect("a")];
        let rr = Shape {
            balance: Balance::RoundRobin,
            retry_500: true,
            rollcall_algorithm: None,
        };
        let lr = Shape::default();
        assert!(rollcall_yaml(l, &b, rr).contains("algorithm: RoundRobin"));
        assert!(!rollcall_yaml(l, &b, lr).contains("algorithm"));
        assert!(haproxy_cfg(l, s, &b, rr).contains("balance roundrobin"));
        let nginx = nginx_conf(l, Path::new("/tmp"), &b, rr);
        assert!(!nginx.contains("least_conn"), "{nginx}");
        assert!(nginx_conf(l, Path::new("/tmp"), &b, lr).contains("least_conn;"));
        // Retrying a 500 is asked of all three alike, or of none.
        assert!(rollcall_yaml(l, &b, rr).contains(r#""500", "502""#));
        assert!(haproxy_cfg(l, s, &b, rr).contains("response-timeout 500 502"));
        assert!(nginx.contains("timeout http_500 http_502"));
        assert!(!rollcall_yaml(l, &b, lr).contains("retryOn"));
        assert!(haproxy_cfg(l, s, &b, lr).contains("response-timeout 502"));
        assert!(!nginx_conf(l, Path::new("/tmp"), &b, lr).contains("http_500"));
        // Another rollcall balancer changes rollcall alone, and never a round-robin scenario.
        let ewma = |shape: Shape| Shape {
            rollcall_algorithm: Some("PeakEwma"),
            ..shape
        };
        assert!(rollcall_yaml(l, &b, ewma(lr)).contains("algorithm: PeakEwma"));
        assert!(rollcall_yaml(l, &b, ewma(rr)).contains("algorithm: RoundRobin"));
        assert!(haproxy_cfg(l, s, &b, ewma(lr)).contains("balance leastconn"));
    }
}
