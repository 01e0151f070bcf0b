//! Making and reading certificates: an ECDSA P-256 CA, serving certificates it signs for the
//! injector's Service names, and the facts `plan` needs read back from PEM.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use time::OffsetDateTime;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::parse_x509_pem;

use super::Material;
use super::plan::{Facts, Leaf, Validity};
use crate::{Error, Result};

/// A certificate and its key, PEM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    pub cert: String,
    pub key: String,
}

fn err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Certificate(format!("{what}: {e}"))
}

fn at(unix: i64) -> Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(unix).map_err(|e| err("time out of range", e))
}

fn seconds(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 4)
}

/// How far before `now` a certificate starts, for clocks a little behind ours: a minute, or a
/// tenth of a short lifetime.
fn backdate(validity: Duration) -> i64 {
    (seconds(validity) / 10).min(60)
}

/// A new CA valid from a little before `now` (clock skew) for `validity`.
pub fn new_authority(now: i64, validity: Duration) -> Result<Issued> {
    let key = KeyPair::generate().map_err(|e| err("generating the CA key", e))?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| err("CA", e))?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "rollcall-injector-ca");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = at(now - backdate(validity))?;
    params.not_after = at(now + seconds(validity))?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| err("signing the CA", e))?;
    Ok(Issued {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A serving certificate for `names`, signed by `ca`, valid for `validity` but never past
/// the CA's own end (`ca_not_after`).
pub fn serving_certificate(
    ca: &Issued,
    ca_not_after: i64,
    names: &[String],
    now: i64,
    validity: Duration,
) -> Result<Issued> {
    let ca_key = KeyPair::from_pem(&ca.key).map_err(|e| err("reading the CA key", e))?;
    let issuer =
        Issuer::from_ca_cert_pem(&ca.cert, ca_key).map_err(|e| err("reading the CA", e))?;
    let key = KeyPair::generate().map_err(|e| err("generating the key", e))?;
    let mut params = CertificateParams::new(names.to_vec()).map_err(|e| err("names", e))?;
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        names.first().map_or("rollcall-injector", String::as_str),
    );
    params.distinguished_name = dn;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.not_before = at(now - backdate(validity))?;
    params.not_after = at((now + seconds(validity)).min(ca_not_after))?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|e| err("signing the certificate", e))?;
    Ok(Issued {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// The validity window of the first certificate in `pem`.
pub fn validity(pem: &str) -> Result<Validity> {
    let (_, parsed) = parse_x509_pem(pem.as_bytes()).map_err(|e| err("not PEM", e))?;
    let cert = parsed
        .parse_x509()
        .map_err(|e| err("not a certificate", e))?;
    Ok(Validity {
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
    })
}

/// Read what `material` holds; anything unreadable counts as absent.
pub fn facts(material: &Material) -> Facts {
    let ca = match (&material.ca_cert, &material.ca_key) {
        (Some(cert), Some(key)) if KeyPair::from_pem(key).is_ok() => validity(cert).ok(),
        _ => None,
    };
    let leaf = match (&material.cert, &material.key, &material.ca_cert) {
        (Some(cert), Some(key), ca_cert) if KeyPair::from_pem(key).is_ok() => {
            leaf_facts(cert, ca_cert.as_deref())
        }
        _ => None,
    };
    Facts { ca, leaf }
}

fn leaf_facts(pem: &str, ca_pem: Option<&str>) -> Option<Leaf> {
    let (_, parsed) = parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = parsed.parse_x509().ok()?;
    let dns_names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(name) => Some(name.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let signed_by_ca = ca_pem
        .and_then(|ca| parse_x509_pem(ca.as_bytes()).ok())
        .and_then(|(_, ca)| {
            let ca = ca.parse_x509().ok()?;
            Some(cert.verify_signature(Some(ca.public_key())).is_ok())
        })
        .unwrap_or(false);
    Some(Leaf {
        validity: Validity {
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
        },
        dns_names,
        signed_by_ca,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    #[test]
    fn issued_certificates_read_back_as_planned() {
        let now = 1_800_000_000;
        let ca = new_authority(now, Duration::from_secs(3650 * DAY)).unwrap();
        let names = super::super::dns_names("rollcall-injector", "rollcall-system");
        let ca_end = validity(&ca.cert).unwrap().not_after;
        let leaf =
            serving_certificate(&ca, ca_end, &names, now, Duration::from_secs(90 * DAY)).unwrap();
        let material = Material {
            ca_cert: Some(ca.cert.clone()),
            ca_key: Some(ca.key.clone()),
            cert: Some(leaf.cert),
            key: Some(leaf.key),
            previous_ca_cert: None,
            previous_ca_key: None,
        };
        let facts = facts(&material);
        assert_eq!(facts.ca.unwrap().not_after, now + 3650 * DAY as i64);
        let leaf = facts.leaf.unwrap();
        assert!(leaf.signed_by_ca);
        assert_eq!(leaf.dns_names, names);
        assert_eq!(leaf.validity.not_after, now + 90 * DAY as i64);
    }

    #[test]
    fn a_certificate_never_outlives_its_authority_and_another_ca_is_noticed() {
        let now = 1_800_000_000;
        let ca = new_authority(now, Duration::from_secs(10 * DAY)).unwrap();
        let other = new_authority(now, Duration::from_secs(10 * DAY)).unwrap();
        let ca_end = validity(&ca.cert).unwrap().not_after;
        let names = vec!["x.svc".to_string()];
        let leaf =
            serving_certificate(&ca, ca_end, &names, now, Duration::from_secs(90 * DAY)).unwrap();
        assert_eq!(validity(&leaf.cert).unwrap().not_after, ca_end);
        let material = Material {
            ca_cert: Some(other.cert),
            ca_key: Some(other.key),
            cert: Some(leaf.cert),
            key: Some(leaf.key),
            previous_ca_cert: None,
            previous_ca_key: None,
        };
        assert!(!facts(&material).leaf.unwrap().signed_by_ca);
    }

    #[test]
    fn garbage_reads_as_absent() {
        let material = Material {
            ca_cert: Some("nope".into()),
            ca_key: Some("nope".into()),
            cert: Some("nope".into()),
            key: Some("nope".into()),
            previous_ca_cert: None,
            previous_ca_key: None,
        };
        assert_eq!(facts(&material), Facts::default());
    }
}
