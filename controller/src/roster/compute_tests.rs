use super::*;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::fixtures::*;
use crate::roster::SliceIndex;
use IntOrString::{Int, String as Name};

/// `slices` parsed as the slice cache holds them, passed in the order given.
fn compute(
    pool: &BackendPool,
    slices: &[EndpointSlice],
    service: Option<&Service>,
) -> Result<Roster, Problem> {
    let cached: Vec<CachedSlice> = slices.iter().map(CachedSlice::from).collect();
    super::compute(pool, &cached, service)
}

fn addrs(r: &Roster) -> Vec<String> {
    r.endpoints.iter().map(|e| e.addr.to_string()).collect()
}

#[test]
fn several_slices_make_one_sorted_roster() {
    let p = pool("web", "web", Name("http".into()));
    let svc = service("web", &[("http", 80)]);
    let slices = [
        slice(
            "web-b",
            "web",
            "IPv4",
            ("http", 8080),
            &[("10.0.0.3", READY)],
        ),
        slice(
            "web-a",
            "web",
            "IPv4",
            ("http", 8080),
            &[("10.0.0.1", READY), ("10.0.0.2", READY)],
        ),
    ];
    let r = compute(&p, &slices, Some(&svc)).unwrap();
    assert_eq!(
        addrs(&r),
        ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]
    );
    assert_eq!(r.service, "shop/web:http");
    assert_eq!(r.endpoints[0].pod.as_deref(), Some("web-0"));
    assert_eq!(r.endpoints[0].zone.as_deref(), Some("zone-a"));
    assert_eq!(r.policy, p.spec.policy);
}

#[test]
fn duplicates_across_slices_collapse_preferring_ready() {
    let p = pool("web", "web", Name("http".into()));
    let svc = service("web", &[("http", 80)]);
    let slices = [
        slice(
            "a",
            "web",
            "IPv4",
            ("http", 8080),
            &[("10.0.0.1", NOT_READY)],
        ),
        slice("b", "web", "IPv4", ("http", 8080), &[("10.0.0.1", READY)]),
        slice(
            "c",
            "web",
            "IPv4",
            ("http", 8080),
            &[("10.0.0.1", TERMINATING_SERVING)],
        ),
    ];
    let r = compute(&p, &slices, Some(&svc)).unwrap();
    assert_eq!(r.endpoints.len(), 1);
    assert!(r.endpoints[0].ready);
    // Whatever order the slices come in.
    let reversed: Vec<_> = slices.iter().rev().cloned().collect();
    assert_eq!(compute(&p, &reversed, Some(&svc)).unwrap(), r);
}

#[test]
fn equally_usable_duplicates_keep_the_first_copy_seen() {
    let p = pool("web", "web", Name("http".into()));
    let svc = service("web", &[("http", 80)]);
    let in_zone = |name: &str, zone: &str| {
        let mut s = slice(name, "web", "IPv4", ("http", 8080), &[("10.0.0.1", READY)]);
        for e in s.endpoints.iter_mut().flatten() {
            e.zone = Some(zone.into());
        }
        s
    };
    let zone_of = |slices: &[EndpointSlice]| {
        let r = compute(&p, slices, Some(&svc)).unwrap();
        assert_eq!(r.endpoints.len(), 1);
        r.endpoints[0].zone.clone().unwrap()
    };
    // Reconcile passes a Service's slices by name, so the same slices give the same roster.
    let (a, b) = (in_zone("a", "zone-a"), in_zone("b", "zone-b"));
    assert_eq!(zone_of(&[a.clone(), b.clone()]), "zone-a");
    assert_eq!(zone_of(&[b, a]), "zone-b");
}

#[test]
fn port_by_number_resolves_through_the_service_port_name() {
    let p = pool("web", "web", Int(80));
    let svc = service("web", &[("http", 80), ("admin", 9000)]);
    let slices = [slice(
        "a",
        "web",
        "IPv4",
        ("http", 8080),
        &[("10.0.0.1", READY)],
    )];
    let r = compute(&p, &slices, Some(&svc)).unwrap();
    assert_eq!(addrs(&r), ["10.0.0.1:8080"]);
    // The admin port's slice entries are not the pool's.
    let admin = pool("admin", "web", Name("admin".into()));
    let r = compute(&admin, &slices, Some(&svc)).unwrap();
    assert!(r.endpoints.is_empty());
}

#[test]
fn unnamed_single_port_service_matches_unnamed_slice_port() {
    let p = pool("web", "web", Int(80));
    let svc = service("web", &[("", 80)]);
    let slices = [slice(
        "a",
        "web",
        "IPv4",
        ("", 8080),
        &[("10.0.0.1", READY)],
    )];
    assert_eq!(
        addrs(&compute(&p, &slices, Some(&svc)).unwrap()),
        ["10.0.0.1:8080"]
    );
}

#[test]
fn target_port_may_differ_between_slices() {
    let p = pool("web", "web", Name("http".into()));
    let svc = service("web", &[("http", 80)]);
    let slices = [
        slice("old", "web", "IPv4", ("http", 8080), &[("10.0.0.1", READY)]),
        slice("new", "web", "IPv4", ("http", 9090), &[("10.0.0.2", READY)]),
    ];
    let r = compute(&p, &slices, Some(&svc)).unwrap();
    assert_eq!(addrs(&r), ["10.0.0.1:8080", "10.0.0.2:9090"]);
}

#[test]
fn conditions_follow_endpointslice_semantics() {
    let p = pool("web", "web", Name("http".into()));
    let svc = service("web", &[("http", 80)]);
    let slices = [slice(
        "a",
        "web",
        "IPv4",
        ("http", 8080),
        &[
            ("10.0.0.1", UNSET),
            ("10.0.0.2", NOT_READY),
            ("10.0.0.3", TERMINATING_SERVING),
        ],
    )];
    let r = compute(&p, &slices, Some(&svc)).unwrap();
    let flags: Vec<_> = r
        .endpoints
        .iter()
        .map(|e| (e.ready, e.serving, e.terminating))
        .collect();
    assert_eq!(
        flags,
        [
            (true, true, false),
            (false, false, false),
            (false, true, true)
        ]
    );
}

#[test]
fn a_dual_stack_service_routes_on_its_primary_family_only_and_ignores_fqdn() {
    let p = pool("web", "web", Name("http".into()));
    let mut svc = service("web", &[("http", 80)]);
    let slices = [
        slice("v4", "web", "IPv4", ("http", 8080), &[("10.0.0.1", READY)]),
        slice("v6", "web", "IPv6", ("http", 8080), &[("fd00::1", READY)]),
        slice(
            "dns",
            "web",
            "FQDN",
            ("http", 8080),
            &[("web.example.com", READY)],
        ),
    ];
    // A dual-stack pod has one address per family: counting both would double its weight.
    let r = compute(&p, &slices, Some(&svc)).unwrap();
    assert_eq!(addrs(&r), ["10.0.0.1:8080"]);
    svc.spec.as_mut().unwrap().ip_families = Some(vec!["IPv6".into(), "IPv4".into()]);
    let r = compute(&p, &slices, Some(&svc)).unwrap();
    assert_eq!(addrs(&r), ["[fd00::1]:8080"]);
}

#[test]
fn slices_of_other_services_are_ignored() {
    // The reconcile computes from the slices the cache files under the pool's Service.
    let p = pool("web", "web", Name("http".into()));
    let svc = service("web", &[("http", 80)]);
    let mut index = SliceIndex::default();
    for s in [
        slice("a", "web", "IPv4", ("http", 8080), &[("10.0.0.1", READY)]),
        slice("b", "other", "IPv4", ("http", 8080), &[("10.0.0.9", READY)]),
    ] {
        index.apply(&kube::runtime::watcher::Event::Apply(s));
    }
    let ours = index.slices_of(NS, "web");
    let r = super::compute(&p, ours.iter().map(|s| &**s), Some(&svc)).unwrap();
    assert_eq!(addrs(&r), ["10.0.0.1:8080"]);
}

#[test]
fn missing_service_is_a_problem_not_an_error() {
    let p = pool("web", "web", Name("http".into()));
    let err = compute(&p, &[], None).unwrap_err();
    assert_eq!(err.reason, UnavailableReason::ServiceNotFound);
    assert_eq!(err.message, "Service shop/web does not exist");
    let other = service("not-web", &[("http", 80)]);
    assert_eq!(
        compute(&p, &[], Some(&other)).unwrap_err().reason,
        UnavailableReason::ServiceNotFound
    );
}

#[test]
fn unknown_port_says_which_ports_exist() {
    let svc = service("web", &[("http", 80), ("", 81)]);
    let err = compute(&pool("web", "web", Name("grpc".into())), &[], Some(&svc)).unwrap_err();
    assert_eq!(err.reason, UnavailableReason::PortNotFound);
    assert_eq!(
        err.message,
        "Service web has no port named \"grpc\"; its ports are [http (80), 81]"
    );
    let err = compute(&pool("web", "web", Int(443)), &[], Some(&svc)).unwrap_err();
    assert_eq!(err.reason, UnavailableReason::PortNotFound);
}

#[test]
fn service_without_slices_is_an_empty_roster() {
    let p = pool("web", "web", Int(80));
    let svc = service("web", &[("http", 80)]);
    assert!(compute(&p, &[], Some(&svc)).unwrap().endpoints.is_empty());
}
