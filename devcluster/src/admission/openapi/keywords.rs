//! The per-value keyword checks of kube-openapi `pkg/validation/validate`: `type.go`
//! (type and format of the value), `validator.go` (string, number and enum checks) and
//! `values.go`, with the messages of `pkg/validation/errors/schema.go`.

use serde_json::{Number, Value, json};

use super::super::goformat::{float_v, quote, rune_count};
use super::super::goregex;
use super::Node;
use super::formats;
use super::result::{Code, Issue, Outcome};

/// The kind of a decoded JSON value, as Go's `reflect.Kind` sees an unstructured object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    String,
    Integer,
    Number,
    Array,
    Object,
}

/// A JSON number as the API server decodes it: `int64` when it fits, `float64` otherwise.
#[derive(Clone, Copy, Debug)]
pub enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub fn of(n: &Number) -> Self {
        n.as_i64()
            .map_or_else(|| Num::Float(n.as_f64().unwrap_or(0.0)), Num::Int)
    }

    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    fn to_json(self) -> Value {
        match self {
            Num::Int(i) => json!(i),
            Num::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        }
    }
}

pub fn kind_of(value: &Value) -> Kind {
    match value {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::String(_) => Kind::String,
        Value::Number(n) if n.as_i64().is_some() => Kind::Integer,
        Value::Number(_) => Kind::Number,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
    }
}

/// The OpenAPI type name `schemaInfoForType` reports for a value.
pub fn type_name_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Null => "null",
        Kind::Bool => "boolean",
        Kind::String => "string",
        Kind::Integer => "integer",
        Kind::Number => "number",
        Kind::Array => "array",
        Kind::Object => "object",
    }
}

/// `swag.IsFloat64AJSONInteger`.
pub fn is_json_integer(f: f64) -> bool {
    const MAX_JSON_FLOAT: f64 = 9_007_199_254_740_992.0; // 2^53
    if !f.is_finite() || f.abs() > MAX_JSON_FLOAT {
        return false;
    }
    let truncated = f.trunc();
    if f == truncated {
        return true;
    }
    let diff = (f - truncated).abs();
    diff / (f.abs() + truncated.abs()) < 1e-9
}

/// `errors.InvalidType` with a string value: `spec.x in body must be of type integer: "string"`.
pub fn invalid_type(path: &str, type_name: &str, value: &str) -> Issue {
    Issue::new(
        Code::InvalidType,
        path,
        Some(json!(value)),
        format!(
            "{path} in body must be of type {type_name}: {}",
            quote(value)
        ),
    )
}

/// `typeValidator.Validate`.
pub fn check_type(node: &Node, data: &Value, path: &str) -> Outcome {
    let types = &node.types;
    let has = |t: &str| types.iter().any(|x| x == t);
    let mut result = Outcome::default();
    result.inc();
    let kind = kind_of(data);
    if kind == Kind::Null {
        if !types.is_empty() && !has("null") && !node.schema.nullable() {
            return Outcome::failed(invalid_type(path, &types.join(","), "null"));
        }
        return result;
    }
    let schema_type = type_name_of(kind);
    let data_format = match kind {
        Kind::Integer => "int64",
        Kind::Number => "float64",
        _ => "",
    };
    let float_int =
        kind == Kind::Number && data.as_f64().is_some_and(is_json_integer) && has("integer");
    let int_float = kind == Kind::Integer && has("number");
    let format = node.format.as_str();
    let matches_type = has(schema_type) || float_int || int_float;
    if kind != Kind::String
        && kind != Kind::Array
        && !format.is_empty()
        && !(matches_type || data_format == format)
    {
        return Outcome::failed(invalid_type(path, format, data_format));
    }
    let numeric = has("number") || has("integer");
    if !numeric && !format.is_empty() && (kind == Kind::String || kind == Kind::Array) {
        return result;
    }
    if !matches_type {
        return Outcome::failed(invalid_type(path, &types.join(","), schema_type));
    }
    result
}

/// `stringValidator.Validate`: the first failing of maxLength, minLength, pattern.
pub fn check_string(node: &Node, text: &str, path: &str) -> Outcome {
    let value = Some(json!(text));
    let length = rune_count(text) as i64;
    if let Some(max) = node.schema.count("maxLength").filter(|max| length > *max) {
        let message = format!("{path} in body should be at most {max} chars long");
        return Outcome::failed(Issue::new(Code::TooLong, path, value, message).with_limit(max));
    }
    if let Some(min) = node.schema.count("minLength").filter(|min| length < *min) {
        let message = format!("{path} in body should be at least {min} chars long");
        return Outcome::failed(Issue::new(Code::TooShort, path, value, message).with_limit(min));
    }
    if let Some(pattern) = node.schema.pattern().filter(|p| !p.is_empty()) {
        let shown = match goregex::compile(pattern) {
            Ok(re) if re.is_match(text) => return Outcome::default(),
            Ok(_) => pattern.to_string(),
            Err(error) => format!("{pattern}, but pattern is invalid: {error}"),
        };
        let message = format!("{path} in body should match '{shown}'");
        return Outcome::failed(Issue::new(Code::Pattern, path, value, message));
    }
    Outcome::default()
}

/// `formatValidator.Validate` (only for formats the server keeps).
pub fn check_format(node: &Node, text: &str, path: &str) -> Outcome {
    if formats::validates(&node.format, text) {
        Outcome::default()
    } else {
        Outcome::failed(invalid_type(path, &node.format, text))
    }
}

/// `basicCommonValidator.Validate`: `enum`.
pub fn check_enum(node: &Node, data: &Value, path: &str) -> Outcome {
    let Some(allowed) = node.schema.enum_values().filter(|e| !e.is_empty()) else {
        return Outcome::default();
    };
    if allowed
        .iter()
        .any(|candidate| enum_matches(data, candidate))
    {
        return Outcome::default();
    }
    let listed: Vec<String> = allowed.iter().map(go_print).collect();
    let message = format!("{path} in body should be one of [{}]", listed.join(" "));
    let value = (!data.is_null()).then(|| data.clone());
    let mut issue = Issue::new(Code::Enum, path, value, message);
    if let Issue::Validation {
        allowed: values, ..
    } = &mut issue
    {
        values.clone_from(allowed);
    }
    Outcome::failed(issue)
}

/// `%v` of a decoded JSON value (only used inside messages that are never shown verbatim).
fn go_print(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => match Num::of(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => float_v(f),
        },
        other => other.to_string(),
    }
}

/// Go's `reflect` comparison: the value converted to the enum entry's type, then `DeepEqual`.
fn enum_matches(data: &Value, candidate: &Value) -> bool {
    match (candidate, data) {
        (Value::String(want), Value::String(got)) => want == got,
        // Go converts an integer to a string as a rune.
        (Value::String(want), Value::Number(n)) => n.as_i64().is_some_and(|i| {
            let rune = u32::try_from(i)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('\u{FFFD}');
            *want == rune.to_string()
        }),
        (Value::Number(want), Value::Number(got)) => match (Num::of(want), Num::of(got)) {
            (Num::Int(w), Num::Int(g)) => w == g,
            (Num::Int(w), Num::Float(g)) => g.is_finite() && w == g as i64,
            (Num::Float(w), g) => w == g.as_f64(),
        },
        (Value::Bool(want), Value::Bool(got)) => want == got,
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => {
            data == candidate
        }
        _ => false,
    }
}

/// `IsValueValidAgainstRange`: a number that does not fit the declared type/format.
fn range_error(value: Num, node: &Node, prefix: &str, path: &str) -> Option<String> {
    let text = match value {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => format!("{f}"),
    };
    let fits = match node.number_type {
        "integer" if node.number_format == "int32" => text.parse::<i32>().is_ok(),
        "integer" => text.parse::<i64>().is_ok(),
        _ if node.number_format == "float" => text
            .parse::<f64>()
            .is_ok_and(|f| f.is_finite() && f.abs() <= f64::from(f32::MAX)),
        _ => true,
    };
    if fits {
        return None;
    }
    let type_name = node.number_type;
    Some(if node.number_format.is_empty() {
        format!("{prefix} value must be of type {type_name} (default format) in {path}")
    } else {
        let format = node.number_format;
        format!("{prefix} value must be of type {type_name} with format {format} in {path}")
    })
}

fn print_bound(bound: Num) -> String {
    match bound {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => float_v(f),
    }
}

/// A bound as the native comparison sees it: truncated to `int64` for integer data.
fn native_bound(data: Num, bound: f64, in_range: bool) -> Num {
    match data {
        Num::Int(_) if in_range => Num::Int(bound as i64),
        _ => Num::Float(bound),
    }
}

/// `numberValidator.Validate`: range of the value, multipleOf, minimum, maximum.
pub fn check_number(node: &Node, data: Num, path: &str) -> Outcome {
    let schema = node.schema;
    let mut result = Outcome::default();
    if let Some(error) = range_error(data, node, "Checked", path) {
        result.add(Issue::Other(error));
    }
    let mut multiple = Outcome::default();
    if let Some(factor) = schema.number("multipleOf") {
        let range = range_error(Num::Float(factor), node, "MultipleOf", path);
        let factor = native_bound(data, factor, range.is_none());
        if let Some(error) = range {
            multiple.add(Issue::Other(error));
        }
        if let Some(issue) = multiple_of(data, factor, path) {
            multiple.add(issue);
        }
    }
    let mut minimum = Outcome::default();
    if let Some(min) = schema.number("minimum") {
        let range = range_error(Num::Float(min), node, "Minimum boundary", path);
        let bound = native_bound(data, min, range.is_none());
        if let Some(error) = range {
            minimum.add(Issue::Other(error));
        }
        let exclusive = schema.exclusive_minimum();
        let below = compare(data, bound).is_some_and(|o| o.is_lt() || (exclusive && o.is_eq()));
        if below {
            let relation = if exclusive {
                "greater than"
            } else {
                "greater than or equal to"
            };
            let message = format!("{path} in body should be {relation} {}", print_bound(bound));
            minimum.add(Issue::new(
                Code::Minimum,
                path,
                Some(data.to_json()),
                message,
            ));
        }
    }
    let mut maximum = Outcome::default();
    if let Some(max) = schema.number("maximum") {
        let range = range_error(Num::Float(max), node, "Maximum boundary", path);
        let bound = native_bound(data, max, range.is_none());
        if let Some(error) = range {
            maximum.add(Issue::Other(error));
        }
        let exclusive = schema.exclusive_maximum();
        let above = compare(data, bound).is_some_and(|o| o.is_gt() || (exclusive && o.is_eq()));
        if above {
            let relation = if exclusive {
                "less than"
            } else {
                "less than or equal to"
            };
            let message = format!("{path} in body should be {relation} {}", print_bound(bound));
            maximum.add(Issue::new(
                Code::Maximum,
                path,
                Some(data.to_json()),
                message,
            ));
        }
    }
    result.merge(multiple);
    result.merge(minimum);
    result.merge(maximum);
    result.inc();
    result
}

fn compare(data: Num, bound: Num) -> Option<std::cmp::Ordering> {
    match (data, bound) {
        (Num::Int(d), Num::Int(b)) => Some(d.cmp(&b)),
        (d, b) => d.as_f64().partial_cmp(&b.as_f64()),
    }
}

fn multiple_of(data: Num, factor: Num, path: &str) -> Option<Issue> {
    let not_positive = match factor {
        Num::Int(f) => f <= 0,
        Num::Float(f) => f <= 0.0,
    };
    if not_positive {
        let message = format!(
            "factor MultipleOf declared for {path} must be positive: {}",
            print_bound(factor)
        );
        return Some(Issue::new(
            Code::MultipleOfMustBePositive,
            path,
            Some(factor.to_json()),
            message,
        ));
    }
    let is_multiple = match (data, factor) {
        (Num::Int(d), Num::Int(f)) => d % f == 0,
        (d, f) => {
            let (d, f) = (d.as_f64(), f.as_f64());
            is_json_integer(if f < 1.0 { 1.0 / f * d } else { d / f })
        }
    };
    (!is_multiple).then(|| {
        let message = format!(
            "{path} in body should be a multiple of {}",
            print_bound(factor)
        );
        Issue::new(Code::MultipleOf, path, Some(data.to_json()), message)
    })
}
