//! String formats a CRD may use and their checks, as kube-openapi `pkg/validation/strfmt`
//! registers them and apiextensions-apiserver `pkg/apiserver/validation/formats.go` keeps them
//! (other formats are stripped and never checked).

use std::net::Ipv6Addr;
use std::sync::LazyLock;

use regex::Regex;

/// Formats kept by the 1.35 server (dashes removed, as go-openapi normalises names).
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8sshortname",
    "k8slongname",
];

fn normalize(format: &str) -> String {
    format.replace('-', "")
}

/// Whether the server keeps and checks this string format.
pub fn is_supported(format: &str) -> bool {
    SUPPORTED.contains(&normalize(format).as_str())
}

fn regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

macro_rules! static_regex {
    ($name:ident, $pattern:expr) => {
        static $name: LazyLock<Option<Regex>> = LazyLock::new(|| regex($pattern));
    };
}

static_regex!(
    UUID,
    "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
static_regex!(
    UUID3,
    "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"
);
static_regex!(
    UUID4,
    "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
static_regex!(
    UUID5,
    "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"
);
static_regex!(
    HOSTNAME,
    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$"
);
static_regex!(
    DATE_TIME_CLOCK,
    r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"
);
static_regex!(
    BASE64,
    r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"
);
static_regex!(SSN, r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$");
static_regex!(HEX_COLOR, "^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$");
static_regex!(
    RGB_COLOR,
    r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$"
);
static_regex!(SHORT_NAME, "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
static_regex!(
    LONG_NAME,
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
);
static_regex!(
    EMAIL,
    r"^(?:[^<>@\s]+@[^<>@\s]+|[^<>]*<[^<>@\s]+@[^<>@\s]+>)$"
);
static_regex!(URI_SCHEME, r"^[A-Za-z][A-Za-z0-9+.-]*:");
static_regex!(DURATION_PART, r"((\d+)\s*([A-Za-zµ]+))");

fn matches(re: &LazyLock<Option<Regex>>, text: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(text))
}

/// Whether `text` is valid for the (supported) `format`.
pub fn validates(format: &str, text: &str) -> bool {
    match normalize(format).as_str() {
        "datetime" => is_date_time(text),
        "date" => is_date(text),
        "uuid" => matches(&UUID, text),
        "uuid3" => matches(&UUID3, text),
        "uuid4" => matches(&UUID4, text),
        "uuid5" => matches(&UUID5, text),
        "hostname" => is_hostname(text),
        "ipv4" => parse_ip_sloppy(text).is_some() && text.contains('.'),
        "ipv6" => parse_ip_sloppy(text).is_some() && text.contains(':'),
        "cidr" => is_cidr(text),
        "mac" => is_mac(text),
        "bsonobjectid" => text.len() == 24 && text.bytes().all(|b| b.is_ascii_hexdigit()),
        "byte" => matches(&BASE64, text),
        "password" => true,
        "duration" => is_duration(text),
        "ssn" => matches(&SSN, text),
        "hexcolor" => matches(&HEX_COLOR, text),
        "rgbcolor" => matches(&RGB_COLOR, text),
        "k8sshortname" => text.len() <= 63 && matches(&SHORT_NAME, text),
        "k8slongname" => text.len() <= 253 && matches(&LONG_NAME, text),
        "email" => matches(&EMAIL, text),
        "uri" => text.starts_with('/') || matches(&URI_SCHEME, text) && !text.contains(' '),
        "isbn" => is_isbn10(text) || is_isbn13(text),
        "isbn10" => is_isbn10(text),
        "isbn13" => is_isbn13(text),
        "creditcard" => is_credit_card(text),
        _ => true,
    }
}

/// `strfmt.IsDateTime`: a full date, `t`, a clock with an offset or `z` (case-insensitive).
fn is_date_time(text: &str) -> bool {
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let parts: Vec<&str> = lower.split('t').collect();
    if parts.len() < 2 || !is_date(parts[0]) {
        return false;
    }
    let Some(Some(caps)) = DATE_TIME_CLOCK.as_ref().map(|re| re.captures(parts[1])) else {
        return false;
    };
    let field = |i: usize| caps.get(i).map_or("", |m| m.as_str());
    field(1) <= "23" && field(2) <= "59" && field(3) <= "59"
}

/// Go `time.Parse("2006-01-02", text)`.
pub fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = text.get(range)?;
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else {
        return false;
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

fn is_hostname(text: &str) -> bool {
    matches(&HOSTNAME, text) && text.len() <= 255 && text.split('.').all(|label| label.len() <= 63)
}

/// `netutils.ParseIPSloppy`: IPv4 with leading zeros tolerated, or IPv6.
fn parse_ip_sloppy(text: &str) -> Option<()> {
    if text.contains(':') {
        return text.parse::<Ipv6Addr>().ok().map(|_| ());
    }
    let parts: Vec<&str> = text.split('.').collect();
    let valid = parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.len() <= 3
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n <= 255)
        });
    valid.then_some(())
}

fn is_cidr(text: &str) -> bool {
    let Some((ip, prefix)) = text.split_once('/') else {
        return false;
    };
    if parse_ip_sloppy(ip).is_none()
        || prefix.is_empty()
        || !prefix.bytes().all(|b| b.is_ascii_digit())
    {
        return false;
    }
    let bits = if ip.contains(':') { 128 } else { 32 };
    prefix.parse::<u32>().is_ok_and(|n| n <= bits)
}

/// Go `net.ParseMAC`: 6, 8 or 20 bytes as `aa:bb:..`, `aa-bb-..` or `aabb.ccdd.eeff`.
fn is_mac(text: &str) -> bool {
    let hex = |group: &str, len: usize| {
        group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let byte_counts = [6, 8, 20];
    for separator in [':', '-'] {
        let groups: Vec<&str> = text.split(separator).collect();
        if groups.len() > 1 {
            return byte_counts.contains(&groups.len()) && groups.iter().all(|g| hex(g, 2));
        }
    }
    let groups: Vec<&str> = text.split('.').collect();
    byte_counts.contains(&(groups.len() * 2)) && groups.iter().all(|g| hex(g, 4))
}

/// `strfmt.ParseDuration`: Go's `time.ParseDuration`, or loose `5 seconds` style parts.
fn is_duration(text: &str) -> bool {
    if super::super::cel::parse_go_duration(text).is_ok() {
        return true;
    }
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let Some(re) = DURATION_PART.as_ref() else {
        return false;
    };
    re.captures_iter(text).any(|caps| {
        let unit = caps.get(3).map_or("", |m| m.as_str()).trim().to_lowercase();
        UNITS.iter().any(|variants| {
            variants.iter().enumerate().any(|(i, variant)| {
                (i == variants.len() - 1 && unit.starts_with(variant)) || unit == *variant
            })
        })
    })
}

fn isbn_digits(text: &str) -> String {
    text.chars().filter(|c| *c != '-' && *c != ' ').collect()
}

fn is_isbn10(text: &str) -> bool {
    let digits = isbn_digits(text);
    let bytes = digits.as_bytes();
    if bytes.len() != 10 || !bytes[..9].iter().all(u8::is_ascii_digit) {
        return false;
    }
    let last = match bytes[9] {
        b'X' => 10,
        b if b.is_ascii_digit() => u32::from(b - b'0'),
        _ => return false,
    };
    let sum: u32 = bytes[..9]
        .iter()
        .enumerate()
        .map(|(i, b)| (i as u32 + 1) * u32::from(b - b'0'))
        .sum();
    (sum + 10 * last).is_multiple_of(11)
}

fn is_isbn13(text: &str) -> bool {
    let digits = isbn_digits(text);
    if digits.len() != 13 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let sum: u32 = digits
        .bytes()
        .enumerate()
        .map(|(i, b)| u32::from(b - b'0') * if i % 2 == 0 { 1 } else { 3 })
        .sum();
    sum.is_multiple_of(10)
}

/// Approximation of govalidator's check: 12 to 19 digits (separators ignored) passing Luhn.
fn is_credit_card(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(12..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, d)| {
            if i % 2 == 1 {
                if d * 2 > 9 { d * 2 - 9 } else { d * 2 }
            } else {
                *d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}
