//! The fleet benchmark's driver (`rollcall-fleet`, behind `bench/fleet.sh`) still runs end to
//! end: a small fleet over TLS with tokens, through the local API server and the real
//! controller, prints its one `fleet:` line with every field docs/benchmarks.md quotes. The
//! numbers are not judged here (benchmarks measure; tests assert behaviour): only that each change
//! reached every simulated sidecar and the restart resynced them, which the driver checks
//! itself and fails on otherwise.

use std::time::Duration;

use rollcall_testkit::system::binary;

#[tokio::test]
async fn a_small_fleet_over_tls_runs_to_its_fleet_line() {
    let run = tokio::process::Command::new(binary("rollcall-fleet").unwrap())
        .args(["run", "--scenario", "smoke", "--sidecars", "8"])
        .args([
            "--endpoints",
            "200",
            "--pools",
            "2",
            "--pools-per-sidecar",
            "2",
        ])
        .args(["--changes", "2", "--tls"])
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(240), run)
        .await
        .expect("the fleet run ends by itself")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "rollcall-fleet failed: {stdout}\n{stderr}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("fleet: scenario=smoke"))
        .unwrap_or_else(|| panic!("no fleet line in {stdout}\n{stderr}"));
    let field = |name: &str| -> f64 {
        let value = line
            .split_whitespace()
            .find_map(|f| f.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in {line}"));
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value} is not a number"))
    };
    assert!(line.contains(" auth=true tls=true "), "{line}");
    for name in [
        "first_ms",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "rss_mib",
        "idle_rss_mib",
        "connect_s",
        "settle_s",
        "resync_s",
    ] {
        let value = field(name);
        assert!(
            value.is_finite() && value >= 0.0,
            "{name}={value} in {line}"
        );
    }
    assert!(field("rss_mib") > 0.0, "{line}");
    assert!(field("p50_ms") <= field("p99_ms"), "{line}");
}
