//! The controller's roster certificate, issued from the injector's own CA into a second Secret
//! that the controller mounts, and the CA bundle every injected sidecar is handed to check it
//! with. This is what makes the roster channel TLS with no configuration: no cert-manager, no
//! CA ConfigMap copied into application namespaces.
//!
//! Why the injector: it already keeps a CA (for the API server's calls to the webhook), renews
//! it, and is the one component that writes every sidecar's command line, so it is trusted with
//! the sidecars' routing whatever else is true; a second CA would add a key to guard and no
//! protection. Why the pod spec (`ROLLCALL_CONTROLLER_CA_PEM`): a pod can mount only its own
//! namespace's ConfigMaps, and copying one into every namespace needs cluster-wide write access.
//! Linkerd hands its trust anchors to proxies the same way.
//!
//! Rotation: sidecars read their CA bundle at start, so one injected before the CA was renewed
//! trusts only the previous CA. The roster certificate is therefore issued from the previous
//! CA for as long as that CA outlives a whole certificate (`signer`), and from the current one
//! after: a sidecar stops trusting the controller only if it runs longer than the overlap
//! (a third of the CA's ten years, less one certificate lifetime).
//!
//! The decisions are pure (`signer`, `desired`); `CertStore` does the I/O.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;

use super::Material;
use super::issue::{self, Issued};
use super::plan::{self, Plan};
use crate::Result;

/// The bundle of CAs the injected sidecars trust, once known (`None` until the first sync).
pub type Trust = Arc<ArcSwapOption<String>>;

/// Which Secret holds the roster certificate and the names it must cover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RosterCertificate {
    pub secret: String,
    /// The controller Service's DNS names.
    pub names: Vec<String>,
}

/// The CA to issue the roster certificate from at `now`: the previous one (which every sidecar
/// injected in either CA's lifetime trusts) while it outlives a certificate of `validity`
/// issued now, else the current one.
pub fn signer<'a>(
    current: &'a Issued,
    previous: Option<&'a Issued>,
    now: i64,
    validity: Duration,
) -> &'a Issued {
    let lifetime = i64::try_from(validity.as_secs()).unwrap_or(i64::MAX / 4);
    previous
        .filter(|p| p.cert.trim() != current.cert.trim())
        .filter(|p| {
            issue::validity(&p.cert)
                .is_ok_and(|v| v.valid_at(now) && v.not_after > now.saturating_add(lifetime))
        })
        .unwrap_or(current)
}

/// What the roster Secret must hold given the injector's `authority` (its current CA) and the
/// `bundle` sidecars trust, or `None` when `stored` already does. The leaf is renewed on the
/// same rules as the webhook's (a third of its life left, wrong names, not signed by the
/// current CA, outliving it); the Secret's `ca.crt` always carries the current bundle.
pub fn desired(
    authority: &Issued,
    bundle: &str,
    stored: &Material,
    names: &[String],
    now: i64,
    validity: Duration,
) -> Result<Option<Material>> {
    let seen = Material {
        ca_cert: Some(authority.cert.clone()),
        ca_key: Some(authority.key.clone()),
        previous_ca_cert: None,
        previous_ca_key: None,
        cert: stored.cert.clone(),
        key: stored.key.clone(),
    };
    let plan = plan::plan(&issue::facts(&seen), names, now);
    let (cert, key) = match (plan, &stored.cert, &stored.key) {
        (Plan::Keep, Some(cert), Some(key)) => (cert.clone(), key.clone()),
        // `NewAuthority` means the CA itself is due: the webhook's round renews it first, so
        // here it only ever means "issue from what we have".
        _ => {
            let ca_end = issue::validity(&authority.cert)?.not_after;
            let leaf = issue::serving_certificate(authority, ca_end, names, now, validity)?;
            (leaf.cert, leaf.key)
        }
    };
    let material = Material {
        ca_cert: Some(bundle.to_owned()),
        ca_key: None,
        previous_ca_cert: None,
        previous_ca_key: None,
        cert: Some(cert),
        key: Some(key),
    };
    Ok((material != *stored).then_some(material))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;
    const NOW: i64 = 1_800_000_000;

    fn names() -> Vec<String> {
        super::super::dns_names("rollcall-controller", "rollcall-system")
    }

    fn authority(now: i64) -> Issued {
        issue::new_authority(now, Duration::from_secs(3650 * DAY as u64)).unwrap()
    }

    fn leaf_days() -> Duration {
        Duration::from_secs(90 * DAY as u64)
    }

    #[test]
    fn an_empty_secret_gets_a_leaf_from_the_authority_and_the_bundle() {
        let ca = authority(NOW);
        let bundle = ca.cert.clone();
        let made = desired(
            &ca,
            &bundle,
            &Material::default(),
            &names(),
            NOW,
            leaf_days(),
        )
        .unwrap()
        .expect("an empty Secret is filled");
        assert_eq!(made.ca_cert.as_deref(), Some(bundle.as_str()));
        assert!(
            made.ca_key.is_none(),
            "the CA key never leaves the injector's Secret"
        );
        let seen = Material {
            ca_cert: Some(ca.cert.clone()),
            ca_key: Some(ca.key.clone()),
            ..made.clone()
        };
        let leaf = issue::facts(&seen).leaf.unwrap();
        assert!(leaf.signed_by_ca);
        assert!(names().iter().all(|n| leaf.dns_names.contains(n)));
        assert_eq!(leaf.validity.not_after - NOW, 90 * DAY);
    }

    #[test]
    fn a_good_leaf_is_kept_and_renewed_only_when_due() {
        let ca = authority(NOW);
        let made = desired(
            &ca,
            &ca.cert,
            &Material::default(),
            &names(),
            NOW,
            leaf_days(),
        )
        .unwrap()
        .unwrap();
        for later in [NOW + 1, NOW + 59 * DAY] {
            assert_eq!(
                desired(&ca, &ca.cert, &made, &names(), later, leaf_days()).unwrap(),
                None,
                "at +{} days",
                (later - NOW) / DAY
            );
        }
        let renewed = desired(&ca, &ca.cert, &made, &names(), NOW + 61 * DAY, leaf_days())
            .unwrap()
            .expect("a third of its life left");
        assert_ne!(renewed.cert, made.cert);
    }

    #[test]
    fn a_changed_bundle_is_rewritten_keeping_the_leaf() {
        let ca = authority(NOW);
        let made = desired(
            &ca,
            &ca.cert,
            &Material::default(),
            &names(),
            NOW,
            leaf_days(),
        )
        .unwrap()
        .unwrap();
        let other = authority(NOW);
        let bundle = format!("{}{}", ca.cert, other.cert);
        let rewritten = desired(&ca, &bundle, &made, &names(), NOW + 1, leaf_days())
            .unwrap()
            .unwrap();
        assert_eq!(rewritten.cert, made.cert);
        assert_eq!(rewritten.ca_cert.as_deref(), Some(bundle.as_str()));
    }

    #[test]
    fn a_leaf_from_another_ca_or_for_other_names_is_replaced() {
        let ca = authority(NOW);
        let foreign = authority(NOW);
        let theirs = desired(
            &foreign,
            &foreign.cert,
            &Material::default(),
            &names(),
            NOW,
            leaf_days(),
        )
        .unwrap()
        .unwrap();
        let ours = desired(&ca, &ca.cert, &theirs, &names(), NOW + 1, leaf_days())
            .unwrap()
            .expect("a leaf our CA did not sign is replaced");
        assert_ne!(ours.cert, theirs.cert);
        let moved = super::super::dns_names("rollcall-controller", "elsewhere");
        let renamed = desired(&ca, &ca.cert, &ours, &moved, NOW + 2, leaf_days())
            .unwrap()
            .expect("a leaf for other names is replaced");
        assert_ne!(renamed.cert, ours.cert);
    }

    #[test]
    fn after_a_ca_renewal_the_previous_ca_signs_while_it_outlives_a_certificate() {
        // The previous CA has 400 days left, the new one ten years.
        let previous =
            issue::new_authority(NOW - 3000 * DAY, Duration::from_secs(3400 * DAY as u64)).unwrap();
        let current = authority(NOW);
        let leaf = leaf_days();
        assert_eq!(
            signer(&current, Some(&previous), NOW, leaf).cert,
            previous.cert
        );
        assert_eq!(
            signer(&current, Some(&previous), NOW + 309 * DAY, leaf).cert,
            previous.cert,
            "91 days left: still outlives a 90-day certificate"
        );
        assert_eq!(
            signer(&current, Some(&previous), NOW + 311 * DAY, leaf).cert,
            current.cert,
            "89 days left: the current CA takes over"
        );
        assert_eq!(signer(&current, None, NOW, leaf).cert, current.cert);
        assert_eq!(
            signer(&current, Some(&current), NOW, leaf).cert,
            current.cert
        );

        // A leaf from the previous CA is kept while it signs, replaced once it no longer does.
        let bundle = format!("{}{}", current.cert, previous.cert);
        let from_previous = desired(
            &previous,
            &bundle,
            &Material::default(),
            &names(),
            NOW,
            leaf,
        )
        .unwrap()
        .unwrap();
        let later = NOW + 311 * DAY;
        let next = desired(
            signer(&current, Some(&previous), later, leaf),
            &bundle,
            &from_previous,
            &names(),
            later,
            leaf,
        )
        .unwrap()
        .expect("the current CA's turn: a new leaf");
        let seen = Material {
            ca_cert: Some(current.cert.clone()),
            ca_key: Some(current.key.clone()),
            ..next
        };
        assert!(issue::facts(&seen).leaf.unwrap().signed_by_ca);
    }
}
