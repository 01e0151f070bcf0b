use super::*;

const DAY: i64 = 86_400;

fn names() -> Vec<String> {
    vec!["rollcall-injector.rollcall-system.svc".to_string()]
}

fn window(start: i64, days: i64) -> Validity {
    Validity {
        not_before: start,
        not_after: start + days * DAY,
    }
}

fn facts(ca: Validity, leaf: Validity) -> Facts {
    Facts {
        ca: Some(ca),
        leaf: Some(Leaf {
            validity: leaf,
            dns_names: names(),
            signed_by_ca: true,
        }),
    }
}

#[test]
fn nothing_stored_starts_a_new_authority() {
    assert_eq!(plan(&Facts::default(), &names(), 0), Plan::NewAuthority);
}

#[test]
fn fresh_certificates_are_kept() {
    let f = facts(window(0, 3650), window(0, 90));
    assert_eq!(plan(&f, &names(), DAY), Plan::Keep);
}

#[test]
fn a_certificate_is_renewed_when_a_third_of_its_life_is_left() {
    let f = facts(window(0, 3650), window(0, 90));
    assert_eq!(plan(&f, &names(), 59 * DAY), Plan::Keep);
    assert_eq!(plan(&f, &names(), 60 * DAY), Plan::RenewCertificate);
    assert_eq!(plan(&f, &names(), 100 * DAY), Plan::RenewCertificate);
}

#[test]
fn the_authority_is_renewed_when_a_third_of_its_life_is_left() {
    let f = facts(window(0, 3000), window(1999 * DAY, 90));
    assert_eq!(plan(&f, &names(), 2000 * DAY), Plan::NewAuthority);
}

#[test]
fn a_certificate_for_other_names_or_another_ca_is_replaced() {
    let mut f = facts(window(0, 3650), window(0, 90));
    if let Some(leaf) = f.leaf.as_mut() {
        leaf.dns_names = vec!["old.rollcall-system.svc".into()];
    }
    assert_eq!(plan(&f, &names(), DAY), Plan::RenewCertificate);
    let mut f = facts(window(0, 3650), window(0, 90));
    if let Some(leaf) = f.leaf.as_mut() {
        leaf.signed_by_ca = false;
    }
    assert_eq!(plan(&f, &names(), DAY), Plan::RenewCertificate);
}

#[test]
fn a_certificate_that_would_outlive_its_authority_is_renewed() {
    let f = facts(window(0, 100), window(10 * DAY, 95));
    assert_eq!(plan(&f, &names(), 11 * DAY), Plan::RenewCertificate);
}

#[test]
fn a_missing_certificate_is_issued_from_the_existing_authority() {
    let f = Facts {
        ca: Some(window(0, 3650)),
        leaf: None,
    };
    assert_eq!(plan(&f, &names(), DAY), Plan::RenewCertificate);
}

#[test]
fn the_bundle_keeps_the_previous_authority_while_it_is_valid() {
    let previous = window(0, 10);
    assert_eq!(
        bundle("NEW\n", Some(("OLD\n", previous)), DAY),
        "NEW\nOLD\n"
    );
    assert_eq!(
        bundle("NEW\n", Some(("OLD\n", previous)), 11 * DAY),
        "NEW\n"
    );
    assert_eq!(bundle("NEW", Some(("NEW", previous)), DAY), "NEW\n");
    assert_eq!(bundle("NEW", None, DAY), "NEW\n");
}
