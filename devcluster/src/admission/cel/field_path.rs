//! A rule's `fieldPath` as `ValidFieldPath` (apiextensions-apiserver
//! `pkg/apiserver/schema/cel/validation.go`) normalises it: `.a.b`, `['a.b']`, map keys.

use super::super::path::FieldPath;
use super::super::schema::Schema;

/// `ValidFieldPath(rule.fieldPath, schema).String()`: `.a.b`, `['a.b']` and map keys
/// (`.labels['x']` is `labels[x]`), or `None` when the path does not name a field.
pub fn normalized(field_path: &str, schema: Schema) -> Option<String> {
    if field_path.is_empty() {
        return None;
    }
    let mut path = FieldPath::root();
    let mut current = schema;
    let mut rest = field_path;
    while !rest.is_empty() {
        let (name, after) = if let Some(after_dot) = rest.strip_prefix('.') {
            let end = after_dot.find(['.', '[']).unwrap_or(after_dot.len());
            (after_dot[..end].to_string(), &after_dot[end..])
        } else if let Some(after_bracket) = rest.strip_prefix("['") {
            let (quoted, after) = split_quoted(after_bracket)?;
            (quoted, after.strip_prefix(']')?)
        } else {
            return None;
        };
        if current.properties().is_some() {
            current = current.property(&name)?;
            path = path.child(&name);
        } else if let Some(values) = current.additional_properties_schema() {
            current = values;
            path = path.key(&name);
        } else {
            return None;
        }
        rest = after;
    }
    Some(path.to_string())
}

/// The unescaped content of a single-quoted string up to its closing quote.
fn split_quoted(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => return Some((out, &text[i + 1..])),
            '\\' => {
                let (_, escaped) = chars.next()?;
                out.push(match escaped {
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'v' => '\u{b}',
                    '\'' => '\'',
                    '\\' => '\\',
                    _ => return None,
                });
            }
            other => out.push(other),
        }
    }
    None
}
