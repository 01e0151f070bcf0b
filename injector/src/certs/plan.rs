//! What to do with the certificates, decided from facts and the time: keep them, issue a new
//! serving certificate from the same CA, or start a new CA (and a certificate from it).
//! Pure, so every case is a unit test.

/// The validity window of a certificate, Unix seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

/// What the Secret's certificates are, as far as they could be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// The CA, when its certificate and key both parse.
    pub ca: Option<Validity>,
    /// The serving certificate, when it and its key parse.
    pub leaf: Option<Leaf>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub validity: Validity,
    pub dns_names: Vec<String>,
    /// Whether the CA's key signed it.
    pub signed_by_ca: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    Keep,
    /// A new serving certificate from the current CA.
    RenewCertificate,
    /// A new CA and a serving certificate from it; the old CA stays in the bundle.
    NewAuthority,
}

// === impl Validity ===

impl Validity {
    /// Whether a third or less of the lifetime is left at `now` (or it has not begun).
    pub fn due(&self, now: i64) -> bool {
        let lifetime = (self.not_after - self.not_before).max(0);
        now < self.not_before || now >= self.not_after - lifetime / 3
    }

    pub fn valid_at(&self, now: i64) -> bool {
        self.not_before <= now && now < self.not_after
    }
}

/// What to do at `now` for a certificate that must cover `names`.
pub fn plan(facts: &Facts, names: &[String], now: i64) -> Plan {
    let Some(ca) = facts.ca else {
        return Plan::NewAuthority;
    };
    if ca.due(now) {
        return Plan::NewAuthority;
    }
    match &facts.leaf {
        None => Plan::RenewCertificate,
        Some(leaf) => {
            let covers = names.iter().all(|n| leaf.dns_names.contains(n));
            // A certificate must not outlive its CA: renew it when it would.
            let outlives = leaf.validity.not_after > ca.not_after;
            if !leaf.signed_by_ca || !covers || outlives || leaf.validity.due(now) {
                Plan::RenewCertificate
            } else {
                Plan::Keep
            }
        }
    }
}

/// The `caBundle`: the current CA, then the previous one while it is still valid.
pub fn bundle(current: &str, previous: Option<(&str, Validity)>, now: i64) -> String {
    let mut pem = current.trim_end().to_string();
    pem.push('\n');
    if let Some((previous, validity)) = previous
        && validity.valid_at(now)
        && previous.trim() != current.trim()
    {
        pem.push_str(previous.trim_end());
        pem.push('\n');
    }
    pem
}

#[cfg(test)]
mod tests;
