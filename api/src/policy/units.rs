//! Human-written units of the policy: durations (`2s`, `1m30s`, `500ms`) and percentages
//! (`20%`). Both keep the text form on the wire, the way Kubernetes users write them, and
//! refuse anything else with a message that shows an accepted form.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as text: `2s`, `500ms`, `1m30s`, `5m`, `1h`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DurationString(Duration);

impl DurationString {
    pub const fn new(d: Duration) -> Self {
        Self(d)
    }
    pub const fn secs(s: u64) -> Self {
        Self(Duration::from_secs(s))
    }
    pub const fn millis(ms: u64) -> Self {
        Self(Duration::from_millis(ms))
    }
    pub const fn get(self) -> Duration {
        self.0
    }
    pub const fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl From<DurationString> for Duration {
    fn from(d: DurationString) -> Self {
        d.0
    }
}

impl fmt::Display for DurationString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_zero() {
            return f.write_str("0s");
        }
        if d.as_nanos() > u128::from(u64::MAX) {
            // Past u64 nanoseconds a single small unit ("31960052488880ms") no longer parses
            // back (the parser counts in nanoseconds): every unit in turn does.
            return write_in_parts(f, d);
        }
        if !d.subsec_nanos().is_multiple_of(1_000) {
            // Not a whole microsecond: only nanoseconds say it exactly.
            return write!(f, "{}ns", d.as_nanos());
        }
        if !d.subsec_nanos().is_multiple_of(1_000_000)
            || (d.as_secs() == 0 && d.subsec_millis() == 0)
        {
            return write!(f, "{}us", d.as_micros());
        }
        if d.subsec_millis() != 0 {
            return write!(f, "{}ms", d.as_millis());
        }
        let secs = d.as_secs();
        let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        Ok(())
    }
}

/// `d` as hours, minutes, seconds, milliseconds, microseconds and nanoseconds, each that is not
/// zero: `8877792h21m28s880ms`.
fn write_in_parts(f: &mut fmt::Formatter<'_>, d: Duration) -> fmt::Result {
    let secs = d.as_secs();
    let nanos = d.subsec_nanos();
    let parts = [
        (secs / 3600, "h"),
        (secs / 60 % 60, "m"),
        (secs % 60, "s"),
        (u64::from(nanos / 1_000_000), "ms"),
        (u64::from(nanos / 1_000 % 1_000), "us"),
        (u64::from(nanos % 1_000), "ns"),
    ];
    for (n, unit) in parts {
        if n > 0 {
            write!(f, "{n}{unit}")?;
        }
    }
    Ok(())
}

impl FromStr for DurationString {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let text = s.trim();
        let bad =
            || format!("{s:?} is not a duration; write it like \"500ms\", \"2s\" or \"1m30s\"");
        if text == "0" {
            return Ok(Self(Duration::ZERO));
        }
        // Every number needs a unit: "30" alone is ambiguous and refused.
        if text.is_empty() || text.ends_with(|c: char| c.is_ascii_digit()) {
            return Err(bad());
        }
        humantime::parse_duration(text).map(Self).map_err(|_| bad())
    }
}

impl Serialize for DurationString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DurationString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for DurationString {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^(0|([0-9]+(ms|s|m|h))+)$",
            "description": "A duration such as 500ms, 2s, 1m30s or 1h"
        })
    }
}

/// A percentage written `20%` (a bare number is read as percent too).
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Percent(f64);

impl Percent {
    pub const fn new(p: f64) -> Self {
        Self(p)
    }
    /// The value in percent, 0–100.
    pub const fn get(self) -> f64 {
        self.0
    }
    /// The value as a fraction, 0–1.
    pub fn fraction(self) -> f64 {
        self.0 / 100.0
    }
}

impl fmt::Display for Percent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

impl FromStr for Percent {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let text = s.trim();
        let number = text.strip_suffix('%').unwrap_or(text).trim();
        match number.parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(Self(v)),
            _ => Err(format!("{s:?} is not a percentage; write it like \"20%\"")),
        }
    }
}

impl Serialize for Percent {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Percent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Number(f64),
        }
        match Raw::deserialize(d)? {
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
            Raw::Number(n) => format!("{n}").parse().map_err(serde::de::Error::custom),
        }
    }
}

impl JsonSchema for Percent {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Percent".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9]+(\\.[0-9]+)?%$",
            "description": "A percentage such as 20%"
        })
    }
}
