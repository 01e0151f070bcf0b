use super::*;

fn pool(namespace: &str, name: &str, port: u16) -> PoolPort {
    PoolPort {
        namespace: namespace.into(),
        name: name.into(),
        port,
    }
}

#[test]
fn entries_name_their_namespace_or_take_the_pods() {
    assert_eq!(
        parse("shop/checkout=15001, cart=15002", "web").unwrap(),
        vec![pool("shop", "checkout", 15001), pool("web", "cart", 15002)]
    );
}

#[test]
fn pool_names_may_have_dots_namespaces_may_not() {
    assert_eq!(
        parse("shop/v2.checkout=15001", "web").unwrap(),
        vec![pool("shop", "v2.checkout", 15001)]
    );
    let err = parse("sh.op/checkout=15001", "web").unwrap_err();
    assert!(err.contains("\"sh.op\" is not a namespace name"), "{err}");
}

#[test]
fn a_missing_port_is_refused_with_the_form_to_write() {
    let err = parse("shop/checkout", "web").unwrap_err();
    assert_eq!(
        err,
        "rollcall.dev/pools: entry 1 (\"shop/checkout\"): no local port (=PORT); write POOL-NAMESPACE/POOL-NAME=LOCAL-PORT (or POOL-NAME=LOCAL-PORT for a pool in the pod's namespace), comma separated, e.g. shop/checkout=15001"
    );
}

#[test]
fn ports_outside_1_to_65535_or_not_numbers_are_refused() {
    for bad in ["0", "65536", "-1", "+80", "http", ""] {
        let err = parse(&format!("shop/checkout={bad}"), "web").unwrap_err();
        assert!(
            err.contains("the local port must be a number from 1 to 65535"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn empty_values_and_entries_are_refused() {
    assert!(parse("  ", "web").unwrap_err().contains("is empty"));
    let err = parse("shop/a=15001,,shop/b=15002", "web").unwrap_err();
    assert!(err.contains("entry 2 is empty"), "{err}");
    assert!(
        parse("shop/a=15001,", "web")
            .unwrap_err()
            .contains("entry 2 is empty")
    );
}

#[test]
fn a_pool_or_a_port_named_twice_is_refused() {
    let err = parse("shop/a=15001,shop/a=15002", "web").unwrap_err();
    assert!(err.contains("pool shop/a is named twice"), "{err}");
    let err = parse("shop/a=15001,shop/b=15001", "web").unwrap_err();
    assert!(
        err.contains("local port 15001 is given to two pools"),
        "{err}"
    );
}

#[test]
fn uppercase_names_are_refused() {
    let err = parse("Shop/checkout=15001", "web").unwrap_err();
    assert!(err.contains("entry 1"), "{err}");
    let err = parse("shop/Checkout=15001", "web").unwrap_err();
    assert!(err.contains("is not a BackendPool name"), "{err}");
}

#[test]
fn idle_connection_budgets_from_1_to_100000_are_taken_and_anything_else_refused() {
    assert_eq!(parse_max_idle_connections("4096"), Ok(4096));
    assert_eq!(parse_max_idle_connections(" 1 "), Ok(1));
    assert_eq!(parse_max_idle_connections("100000"), Ok(100_000));
    for bad in ["0", "100001", "-1", "+2", "many", "", "1.5", "1e3"] {
        let message = parse_max_idle_connections(bad).unwrap_err();
        assert!(
            message.starts_with(MAX_IDLE_CONNECTIONS),
            "{bad:?}: {message}"
        );
        assert!(message.contains("from 1 to 100000"), "{bad:?}: {message}");
    }
}

#[test]
fn thread_counts_from_1_to_64_are_taken_and_anything_else_refused() {
    assert_eq!(parse_threads("2"), Ok(2));
    assert_eq!(parse_threads(" 64 "), Ok(64));
    for bad in ["0", "65", "-1", "+2", "two", "", "1.5"] {
        let message = parse_threads(bad).unwrap_err();
        assert!(message.starts_with(THREADS), "{bad:?}: {message}");
        assert!(message.contains("from 1 to 64"), "{bad:?}: {message}");
    }
}

#[test]
fn http1_engines_fast_and_hyper_are_taken_and_anything_else_refused() {
    assert_eq!(parse_http1_engine("fast"), Ok("fast"));
    assert_eq!(parse_http1_engine(" hyper "), Ok("hyper"));
    for bad in ["", "Fast", "quick", "fast,hyper", "h2"] {
        let message = parse_http1_engine(bad).unwrap_err();
        assert!(message.starts_with(HTTP1_ENGINE), "{bad:?}: {message}");
        assert!(message.contains("\"fast\""), "{bad:?}: {message}");
    }
}
