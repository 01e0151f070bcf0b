//! Go `regexp` (RE2) patterns run with the `regex` crate. The syntaxes agree except that Go's
//! Perl classes are ASCII-only (`\d` is `[0-9]`, `\w` is `[0-9A-Za-z_]`, `\s` is
//! `[\t\n\f\r ]`, `\b` an ASCII word boundary) while the crate's are Unicode-aware; this
//! rewrites them before compiling.

use regex::Regex;

/// Compile a Go regular expression; the error text is the `regex` crate's (Go words its own
/// errors differently).
pub fn compile(pattern: &str) -> Result<Regex, String> {
    Regex::new(&translate(pattern)).map_err(|e| e.to_string())
}

fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                out.push_str(&translate_escape(next, in_class));
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                // A `]` (or `^]`) right after the opening bracket is a literal in Go.
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
                if chars.peek() == Some(&']') {
                    chars.next();
                    out.push_str("\\]");
                }
            }
            '[' if in_class => {
                // `[:alpha:]` inside a class: copy through to the closing `:]`.
                if chars.peek() == Some(&':') {
                    out.push('[');
                    for inner in chars.by_ref() {
                        out.push(inner);
                        if inner == ']' {
                            break;
                        }
                    }
                } else {
                    out.push_str("\\[");
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            other => out.push(other),
        }
    }
    out
}

fn translate_escape(escaped: char, in_class: bool) -> String {
    let ascii_class = match escaped {
        'd' => Some("0-9"),
        'w' => Some("0-9A-Za-z_"),
        's' => Some("\\t\\n\\x0C\\r "),
        _ => None,
    };
    if let Some(class) = ascii_class {
        return if in_class {
            class.to_string()
        } else {
            format!("[{class}]")
        };
    }
    match escaped {
        'D' if !in_class => "[^0-9]".to_string(),
        'W' if !in_class => "[^0-9A-Za-z_]".to_string(),
        'S' if !in_class => "[^\\t\\n\\x0C\\r ]".to_string(),
        'b' | 'B' if !in_class => format!("(?-u:\\{escaped})"),
        other => format!("\\{other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::compile;

    #[test]
    fn perl_classes_are_ascii_only() {
        let digits = compile(r"^\d+$").unwrap();
        assert!(digits.is_match("123"));
        assert!(
            !digits.is_match("١٢٣"),
            "Arabic-Indic digits are not \\d in Go"
        );
        let class = compile(r"^[\w.-]+$").unwrap();
        assert!(class.is_match("a_b.c-d"));
        assert!(!class.is_match("é"));
        let literal_bracket = compile(r"^[]a]+$").unwrap();
        assert!(literal_bracket.is_match("]a]"));
        assert!(compile(r"^[[:alpha:]]+$").unwrap().is_match("abc"));
        assert!(compile("[").is_err());
    }
}
