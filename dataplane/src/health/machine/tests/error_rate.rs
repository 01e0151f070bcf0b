//! The error-rate rule inside the pool: an endpoint is judged against its peers' requests.

use super::*;

fn rate_only() -> HealthSettings {
    HealthSettings {
        consecutive_gateway_errors: 0,
        consecutive_5xx: 0,
        error_rate_threshold: 0.2,
        ..settings()
    }
}

/// One request per endpoint in turn, `rounds` times, every 10 ms; endpoint `n` fails when
/// `fails(n, round)`.
fn traffic(fx: &mut Fx, endpoints: u8, rounds: u32, fails: impl Fn(u8, u32) -> bool) -> Vec<Event> {
    let mut events = Vec::new();
    for round in 0..rounds {
        fx.advance(Duration::from_millis(10));
        for n in 1..=endpoints {
            let verdict = if fails(n, round) {
                Verdict::GatewayError
            } else {
                Verdict::Success
            };
            events.extend(fx.request(n, verdict));
        }
    }
    events
}

#[test]
fn a_uniform_overload_ejects_nobody() {
    let mut fx = Fx::healthy(rate_only(), 4);
    // Every endpoint sheds 30%, above the 20% threshold, for the whole 10 s window.
    let events = traffic(&mut fx, 4, 1000, |n, round| (round + u32::from(n)) % 10 < 3);
    assert_eq!(events, vec![]);
}

#[test]
fn an_endpoint_failing_among_clean_peers_is_ejected_on_its_own_few_recent_requests() {
    let mut fx = Fx::healthy(rate_only(), 4);
    // Two seconds of clean traffic: endpoint 1 has a history of 200 successes.
    traffic(&mut fx, 4, 200, |_, _| false);
    // Now it fails one request in five (exactly the threshold, and the balancer is steering away
    // from it: it gets one request for every five its peers get), the others none.
    let mut ejected_at = None;
    for own in 0..100u32 {
        fx.advance(Duration::from_millis(10));
        for n in 2..=4 {
            assert_eq!(fx.requests(n, Verdict::Success, 5), vec![]);
        }
        let verdict = if own % 5 == 4 {
            Verdict::GatewayError
        } else {
            Verdict::Success
        };
        let events = fx.request(1, verdict);
        if events.contains(&moved(1, State::Healthy, State::Ejected, Reason::ErrorRate)) {
            ejected_at = Some(own);
            break;
        }
    }
    // At its seventh failure, 35 requests into the fault: its window is still 97% successes,
    // far from the absolute threshold, but the peers' window over the same 10 s holds no
    // failure at all.
    assert_eq!(ejected_at, Some(34));
}

#[test]
fn alone_in_its_pool_an_endpoint_is_judged_on_the_absolute_threshold() {
    let mut fx = Fx::healthy(rate_only(), 1);
    // 20% exactly never trips; 25% does once minRequests are in.
    assert_eq!(traffic(&mut fx, 1, 100, |_, round| round % 5 == 4), vec![]);
    let events = traffic(&mut fx, 1, 1000, |_, round| round % 4 == 3);
    assert!(
        events.contains(&moved(1, State::Healthy, State::Ejected, Reason::ErrorRate)),
        "{events:?}"
    );
}
