//! Go's text renderings that Kubernetes messages are built from: `strconv.Quote` (`%q`),
//! `%v` of a `float64`, and `encoding/json` output (sorted keys, HTML-safe escapes). Messages
//! must match kube-apiserver byte for byte, so these follow the Go standard library, not Rust.

use serde_json::Value;

/// `strconv.Quote(s)`: double-quoted, with Go's escapes for what `unicode.IsPrint` rejects.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0B}' => out.push_str("\\v"),
            c if is_go_printable(c) => out.push(c),
            c if (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint`: graphic characters and the ASCII space.
fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c,
        '\u{AD}' | '\u{600}'..='\u{605}' | '\u{61C}' | '\u{6DD}' | '\u{70F}' | '\u{180E}'
        | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}'
        | '\u{E000}'..='\u{F8FF}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}' | '\u{FFFE}' | '\u{FFFF}'
        | '\u{F0000}'..='\u{10FFFF}')
}

/// `fmt.Sprintf("%v", f)` for a `float64`: `strconv.FormatFloat(f, 'g', -1, 64)`.
pub fn float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let (negative, digits, exponent) = shortest_digits(f);
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exponent) {
        let (head, tail) = digits.split_at(1);
        let fraction = if tail.is_empty() {
            String::new()
        } else {
            format!(".{tail}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{sign}{head}{fraction}e{exp_sign}{:02}",
            exponent.unsigned_abs()
        )
    } else {
        format!("{sign}{}", plain_decimal(&digits, exponent))
    }
}

/// The shortest round-trip decimal digits of `|f|` and the exponent of the first digit.
fn shortest_digits(f: f64) -> (bool, String, i32) {
    let scientific = format!("{:e}", f.abs());
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    (f.is_sign_negative(), digits, exponent.parse().unwrap_or(0))
}

fn plain_decimal(digits: &str, exponent: i32) -> String {
    let point = exponent + 1;
    if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    }
}

/// `json.Marshal(v)` as Go renders it: object keys sorted, `<`, `>`, `&`, U+2028 and U+2029
/// escaped, floats in `'f'` form unless tiny or huge.
pub fn json_marshal(value: &Value) -> String {
    let mut out = String::new();
    write_json(value, &mut out);
    out
}

fn write_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&json_number(n)),
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(key, out);
                out.push(':');
                if let Some(item) = map.get(key) {
                    write_json(item, out);
                }
            }
            out.push('}');
        }
    }
}

fn json_number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let (negative, digits, exponent) = shortest_digits(f);
        let (head, tail) = digits.split_at(1);
        let fraction = if tail.is_empty() {
            String::new()
        } else {
            format!(".{tail}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        let sign = if negative { "-" } else { "" };
        return format!(
            "{sign}{head}{fraction}e{exp_sign}{}",
            exponent.unsigned_abs()
        );
    }
    format!("{f}")
}

fn write_json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0C}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Number of Unicode scalar values, as Go's `utf8.RuneCountInString`.
pub fn rune_count(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_print_as_go_percent_v() {
        let cases = [
            (100.0, "100"),
            (1.5, "1.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1e21, "1e+21"),
            (-2.5, "-2.5"),
            (0.0, "0"),
        ];
        for (input, want) in cases {
            assert_eq!(float_v(input), want, "{input}");
        }
    }

    #[test]
    fn strings_quote_as_go_strconv_quote() {
        assert_eq!(quote("web"), "\"web\"");
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(quote("héllo ☃"), "\"héllo ☃\"");
        assert_eq!(quote("\u{1}\u{7f}\u{200b}"), "\"\\x01\\x7f\\u200b\"");
    }

    #[test]
    fn json_marshals_as_go_encoding_json() {
        let value = json!({"b": [1, 2.5, 1e-7, 1e21], "a": "<&>", "c": null});
        assert_eq!(
            json_marshal(&value),
            r#"{"a":"\u003c\u0026\u003e","b":[1,2.5,1e-7,1e+21],"c":null}"#
        );
    }
}
