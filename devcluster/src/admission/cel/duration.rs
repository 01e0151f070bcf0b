//! Go's `time.ParseDuration` (`1m30s`, `500ms`, `1.5h`, `-2us`, `0`), which CEL's
//! `duration()` and the `duration` string format use, with its overflow rules.

const NANOS_PER_UNIT: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

const LIMIT: u64 = 1 << 63;

/// Parse a Go duration into nanoseconds; the error text is Go's.
pub fn parse_go_duration(text: &str) -> Result<i64, String> {
    let invalid = || {
        format!(
            "time: invalid duration {}",
            super::super::goformat::quote(text)
        )
    };
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (whole_text, after) = rest.split_at(digits);
        let mut whole: u64 = 0;
        for b in whole_text.bytes() {
            whole = whole
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(b - b'0')))
                .filter(|v| *v <= LIMIT)
                .ok_or_else(invalid)?;
        }
        rest = after;
        let mut fraction: u64 = 0;
        let mut scale = 1.0_f64;
        let mut has_fraction = false;
        if let Some(after_point) = rest.strip_prefix('.') {
            let digits = after_point.bytes().take_while(u8::is_ascii_digit).count();
            has_fraction = digits > 0;
            let mut overflowed = false;
            for b in after_point[..digits].bytes() {
                if overflowed {
                    continue;
                }
                match fraction
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(u64::from(b - b'0')))
                {
                    Some(v) if v < LIMIT => {
                        fraction = v;
                        scale *= 10.0;
                    }
                    _ => overflowed = true,
                }
            }
            rest = &after_point[digits..];
        }
        if whole_text.is_empty() && !has_fraction {
            return Err(invalid());
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(format!(
                "time: missing unit in duration {}",
                super::super::goformat::quote(text)
            ));
        }
        let (unit, after_unit) = rest.split_at(unit_len);
        rest = after_unit;
        let Some(&(_, nanos)) = NANOS_PER_UNIT.iter().find(|(name, _)| *name == unit) else {
            let quote = super::super::goformat::quote;
            return Err(format!(
                "time: unknown unit {} in duration {}",
                quote(unit),
                quote(text)
            ));
        };
        if whole > LIMIT / nanos {
            return Err(invalid());
        }
        let mut value = whole * nanos;
        if fraction > 0 {
            value += (fraction as f64 * (nanos as f64 / scale)) as u64;
            if value > LIMIT {
                return Err(invalid());
            }
        }
        total = total
            .checked_add(value)
            .filter(|t| *t <= LIMIT)
            .ok_or_else(invalid)?;
    }
    if negative {
        return Ok((total as i128).wrapping_neg() as i64);
    }
    i64::try_from(total).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::parse_go_duration;

    #[test]
    fn parses_like_go() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("1m30s", 90_000_000_000),
            ("500ms", 500_000_000),
            ("1h", 3_600_000_000_000),
            ("1.5h", 5_400_000_000_000),
            ("-2us", -2_000),
            ("+3s", 3_000_000_000),
            (".5s", 500_000_000),
            ("1h2m3s4ms5us6ns", 3_723_004_005_006),
        ];
        for (text, nanos) in cases {
            assert_eq!(parse_go_duration(text), Ok(*nanos), "{text}");
        }
        for bad in [
            "",
            "s",
            "1",
            "5sxyz",
            "1d",
            ".s",
            "-",
            "1e3s",
            " 1s",
            "9223372036854775808ns",
        ] {
            assert!(parse_go_duration(bad).is_err(), "{bad} should not parse");
        }
        assert_eq!(parse_go_duration("-9223372036854775808ns"), Ok(i64::MIN));
        assert_eq!(
            parse_go_duration("5x"),
            Err("time: unknown unit \"x\" in duration \"5x\"".into())
        );
    }
}
