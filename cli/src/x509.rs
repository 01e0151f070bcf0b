//! Reading the webhook's certificates: validity, names, and whether one signed another.

use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

/// What `check` needs to know about one certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    pub subject: String,
    pub not_before: i64,
    pub not_after: i64,
    pub dns_names: Vec<String>,
    pub der: Vec<u8>,
}

/// Every certificate in a PEM bundle; text that is not PEM certificates gives an error.
pub fn parse_bundle(pem: &[u8]) -> Result<Vec<CertInfo>, String> {
    let mut out = Vec::new();
    for block in Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| format!("not PEM: {e}"))?;
        let cert = block
            .parse_x509()
            .map_err(|e| format!("not a certificate: {e}"))?;
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
        out.push(CertInfo {
            subject: cert.subject().to_string(),
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
            dns_names,
            der: block.contents.clone(),
        });
    }
    if out.is_empty() {
        return Err("no certificate in it".into());
    }
    Ok(out)
}

/// Whether `issuer` signed `cert` (both DER).
pub fn signed_by(cert: &[u8], issuer: &[u8]) -> bool {
    let (Ok((_, cert)), Ok((_, issuer))) = (
        x509_parser::parse_x509_certificate(cert),
        x509_parser::parse_x509_certificate(issuer),
    ) else {
        return false;
    };
    cert.verify_signature(Some(issuer.public_key())).is_ok()
}

/// `3d 4h` style: how long from `now` until `at` (negative: ago).
pub fn human_until(at: i64, now: i64) -> String {
    let seconds = at - now;
    let text = humantime::format_duration(std::time::Duration::from_secs(seconds.unsigned_abs()))
        .to_string();
    // Days are enough for certificates.
    let short = text.split(' ').take(2).collect::<Vec<_>>().join(" ");
    if seconds < 0 {
        format!("{short} ago")
    } else {
        format!("in {short}")
    }
}
