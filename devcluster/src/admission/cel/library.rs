//! The CEL environment of CRD validation rules: the cel crate's standard functions, with the
//! ones whose semantics differ from cel-go replaced (`size` counts code points, `duration`
//! and `timestamp` parse as Go does, `matches` uses RE2's ASCII classes), plus `type()` and
//! type identifiers, `dyn`, `bool`, UTC time accessors (see `time.rs`), and the Kubernetes libraries a CRD rule can use
//! (apiserver `pkg/cel/library`: regex, lists; cel-go `ext`: strings v2, sets, lists).
//! Kubernetes libraries that are not implemented fail the rule with an explicit message.

use std::collections::HashMap;
use std::sync::Arc;

use cel::extractors::Arguments;
use cel::objects::{Key, Opaque};
use cel::{Context, ExecutionError, FunctionContext, ResolveResult, Value as CelValue};

use super::super::goregex;
use super::duration::parse_go_duration;
use super::strings;
use super::time;

pub const NO_SUCH_OVERLOAD: &str = "no such overload";

/// A CEL type value, what `type(x)` returns and `int`, `string`, ... name.
#[derive(Debug, PartialEq, Eq)]
pub struct CelType(pub &'static str);

impl Opaque for CelType {
    fn runtime_type_name(&self) -> &str {
        "type"
    }
}

fn type_value(name: &'static str) -> CelValue {
    CelValue::Opaque(Arc::new(CelType(name)))
}

/// One call of a library function: its receiver (`x.f()`) and resolved arguments.
pub struct Call<'a> {
    pub target: Option<&'a CelValue>,
    pub args: &'a [CelValue],
}

impl<'a> Call<'a> {
    /// The subject and remaining arguments whether called as `x.f(a)` or `f(x, a)`.
    pub fn split(&self) -> Result<(&'a CelValue, &'a [CelValue]), String> {
        match self.target {
            Some(target) => Ok((target, self.args)),
            None => self
                .args
                .split_first()
                .ok_or_else(|| NO_SUCH_OVERLOAD.to_string()),
        }
    }
}

pub type Native = fn(&Call) -> Result<CelValue, String>;

pub fn register(context: &mut Context, name: &'static str, function: Native) {
    context.add_function(
        name,
        move |ftx: &FunctionContext, Arguments(args): Arguments| -> ResolveResult {
            let call = Call {
                target: ftx.this.as_ref(),
                args: &args,
            };
            function(&call).map_err(|message| ExecutionError::function_error(name, message))
        },
    );
}

/// Kubernetes CEL libraries (or parts) this module does not implement: the URL, IP, CIDR,
/// quantity, semver and format libraries (constructors and member functions), cel-go's string
/// `format`, the `sortBy` macro and JSON-patch helpers.
const UNSUPPORTED: &[&str] = &[
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "ip",
    "isIP",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "isCanonical",
    "cidr",
    "isCIDR",
    "containsIP",
    "containsCIDR",
    "prefixLength",
    "masked",
    "quantity",
    "isQuantity",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "sign",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "semver",
    "isSemver",
    "major",
    "minor",
    "patch",
    "format",
    "format.named",
    "validate",
    "sortBy",
    "jsonpatch.escapeKey",
];

/// cel-go's two-variable comprehensions (Kubernetes 1.32+), which the cel crate lacks; their
/// one-variable macro forms are expanded by the parser and never reach these.
const UNSUPPORTED_COMPREHENSIONS: &[&str] = &[
    "all",
    "exists",
    "existsOne",
    "exists_one",
    "transformList",
    "transformMap",
    "transformMapEntry",
];

pub fn unsupported_message(name: &str) -> String {
    format!(
        "function '{name}' of the Kubernetes CEL library is not supported by this API server (devcluster admission)"
    )
}

/// The context a rule runs in (variables are added by the caller).
pub fn environment() -> Context<'static> {
    let mut context = Context::default();
    for name in [
        "int",
        "uint",
        "double",
        "string",
        "bool",
        "bytes",
        "list",
        "map",
        "null_type",
        "type",
    ] {
        context.add_variable_from_value(name, type_value(name));
    }
    let protobuf: HashMap<Key, CelValue> = HashMap::from([
        (
            Key::String(Arc::new("Duration".into())),
            type_value("google.protobuf.Duration"),
        ),
        (
            Key::String(Arc::new("Timestamp".into())),
            type_value("google.protobuf.Timestamp"),
        ),
    ]);
    let google: HashMap<Key, CelValue> = HashMap::from([(
        Key::String(Arc::new("protobuf".into())),
        CelValue::Map(protobuf.into()),
    )]);
    context.add_variable_from_value("google", CelValue::Map(google.into()));
    register(&mut context, "type", type_of);
    register(&mut context, "dyn", |call| {
        call.split().map(|(v, _)| v.clone())
    });
    register(&mut context, "bool", to_bool);
    register(&mut context, "size", size);
    register(&mut context, "duration", duration);
    register(&mut context, "timestamp", timestamp);
    register(&mut context, "matches", matches);
    register(&mut context, "find", find);
    register(&mut context, "findAll", find_all);
    register(&mut context, "isSorted", is_sorted);
    register(&mut context, "sum", sum);
    register(&mut context, "min", |call| {
        extreme(call, std::cmp::Ordering::Less, "min")
    });
    register(&mut context, "max", |call| {
        extreme(call, std::cmp::Ordering::Greater, "max")
    });
    strings::register_all(&mut context);
    time::register_all(&mut context);
    for name in UNSUPPORTED {
        context.add_function(name, move |_: &FunctionContext| -> ResolveResult {
            Err(ExecutionError::function_error(
                name,
                unsupported_message(name),
            ))
        });
    }
    for name in UNSUPPORTED_COMPREHENSIONS {
        context.add_function(name, move |_: &FunctionContext| -> ResolveResult {
            let message = format!(
                "two-variable comprehension '{name}' is not supported by this API server (devcluster admission)"
            );
            Err(ExecutionError::function_error(name, message))
        });
    }
    context
}

fn type_of(call: &Call) -> Result<CelValue, String> {
    let (value, _) = call.split()?;
    Ok(type_value(match value {
        CelValue::Int(_) => "int",
        CelValue::UInt(_) => "uint",
        CelValue::Float(_) => "double",
        CelValue::String(_) => "string",
        CelValue::Bool(_) => "bool",
        CelValue::Bytes(_) => "bytes",
        CelValue::List(_) => "list",
        CelValue::Map(_) => "map",
        CelValue::Null => "null_type",
        CelValue::Duration(_) => "google.protobuf.Duration",
        CelValue::Timestamp(_) => "google.protobuf.Timestamp",
        CelValue::Opaque(o) if o.runtime_type_name() == "type" => "type",
        CelValue::Opaque(_) => "optional_type",
        CelValue::Function(..) => "function",
    }))
}

fn to_bool(call: &Call) -> Result<CelValue, String> {
    match call.split()? {
        (CelValue::Bool(b), _) => Ok(CelValue::Bool(*b)),
        (CelValue::String(s), _) => match s.as_str() {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(CelValue::Bool(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(CelValue::Bool(false)),
            _ => Err("type conversion error from 'string' to 'bool'".into()),
        },
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

fn size(call: &Call) -> Result<CelValue, String> {
    let length = match call.split()?.0 {
        CelValue::String(s) => s.chars().count(),
        CelValue::Bytes(b) => b.len(),
        CelValue::List(l) => l.len(),
        CelValue::Map(m) => m.map.len(),
        _ => return Err(NO_SUCH_OVERLOAD.into()),
    };
    Ok(CelValue::Int(length as i64))
}

fn duration(call: &Call) -> Result<CelValue, String> {
    match call.split()?.0 {
        CelValue::String(s) => parse_go_duration(s)
            .map(|nanos| CelValue::Duration(chrono::Duration::nanoseconds(nanos)))
            .map_err(|_| {
                "type conversion error from 'string' to 'google.protobuf.Duration'".into()
            }),
        CelValue::Duration(d) => Ok(CelValue::Duration(*d)),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

fn timestamp(call: &Call) -> Result<CelValue, String> {
    let conversion =
        || "type conversion error from 'string' to 'google.protobuf.Timestamp'".to_string();
    match call.split()?.0 {
        CelValue::String(s) => {
            let parsed = chrono::DateTime::parse_from_rfc3339(s).map_err(|_| conversion())?;
            let year = chrono::Datelike::year(&parsed);
            if !(1..=9999).contains(&year) {
                return Err("timestamp out of range".into());
            }
            Ok(CelValue::Timestamp(time::in_utc(parsed)))
        }
        CelValue::Int(seconds) => chrono::DateTime::from_timestamp(*seconds, 0)
            .map(|t| CelValue::Timestamp(t.fixed_offset()))
            .ok_or_else(|| "timestamp out of range".to_string()),
        CelValue::Timestamp(t) => Ok(CelValue::Timestamp(*t)),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

fn string_and_pattern<'a>(
    call: &'a Call,
) -> Result<(&'a str, &'a [CelValue], regex::Regex), String> {
    let (subject, rest) = call.split()?;
    let (CelValue::String(text), Some(CelValue::String(pattern))) = (subject, rest.first()) else {
        return Err(NO_SUCH_OVERLOAD.into());
    };
    let re = goregex::compile(pattern).map_err(|e| format!("error parsing regexp: {e}"))?;
    Ok((text.as_str(), &rest[1..], re))
}

fn matches(call: &Call) -> Result<CelValue, String> {
    let (text, _, re) = string_and_pattern(call)?;
    Ok(CelValue::Bool(re.is_match(text)))
}

fn find(call: &Call) -> Result<CelValue, String> {
    let (text, _, re) = string_and_pattern(call)?;
    let found = re.find(text).map_or("", |m| m.as_str());
    Ok(CelValue::String(Arc::new(found.to_string())))
}

fn find_all(call: &Call) -> Result<CelValue, String> {
    let (text, rest, re) = string_and_pattern(call)?;
    let limit = match rest.first() {
        None => usize::MAX,
        Some(CelValue::Int(n)) if *n < 0 => usize::MAX,
        Some(CelValue::Int(n)) => usize::try_from(*n).unwrap_or(usize::MAX),
        Some(_) => return Err(NO_SUCH_OVERLOAD.into()),
    };
    let found = re
        .find_iter(text)
        .take(limit)
        .map(|m| CelValue::String(Arc::new(m.as_str().to_string())));
    Ok(CelValue::List(Arc::new(found.collect())))
}

fn list_of<'a>(call: &'a Call) -> Result<&'a [CelValue], String> {
    match call.split()?.0 {
        CelValue::List(items) => Ok(items.as_slice()),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

fn is_sorted(call: &Call) -> Result<CelValue, String> {
    let items = list_of(call)?;
    for pair in items.windows(2) {
        match pair[0].partial_cmp(&pair[1]) {
            Some(std::cmp::Ordering::Greater) => return Ok(CelValue::Bool(false)),
            Some(_) => {}
            None => return Err(NO_SUCH_OVERLOAD.into()),
        }
    }
    Ok(CelValue::Bool(true))
}

fn sum(call: &Call) -> Result<CelValue, String> {
    let items = list_of(call)?;
    let Some((first, rest)) = items.split_first() else {
        return Ok(CelValue::Int(0));
    };
    let mut total = first.clone();
    for item in rest {
        total = match (&total, item) {
            (CelValue::Int(a), CelValue::Int(b)) => {
                CelValue::Int(a.checked_add(*b).ok_or("integer overflow")?)
            }
            (CelValue::UInt(a), CelValue::UInt(b)) => {
                CelValue::UInt(a.checked_add(*b).ok_or("unsigned integer overflow")?)
            }
            (CelValue::Float(a), CelValue::Float(b)) => CelValue::Float(a + b),
            (CelValue::Duration(a), CelValue::Duration(b)) => {
                CelValue::Duration(a.checked_add(b).ok_or("duration out of range")?)
            }
            _ => return Err(NO_SUCH_OVERLOAD.into()),
        };
    }
    Ok(total)
}

/// `min()`/`max()` of a list (Kubernetes lists library); called as functions they keep the
/// cel crate's variadic form.
fn extreme(call: &Call, preferred: std::cmp::Ordering, name: &str) -> Result<CelValue, String> {
    let items: &[CelValue] = match (call.target, call.args) {
        (Some(CelValue::List(items)), []) => items,
        (None, [CelValue::List(items)]) => items,
        (None, values) if !values.is_empty() => values,
        _ => return Err(NO_SUCH_OVERLOAD.into()),
    };
    let Some((first, rest)) = items.split_first() else {
        return Err(format!("{name} called on empty list"));
    };
    let mut best = first;
    for item in rest {
        match item.partial_cmp(best) {
            Some(order) if order == preferred => best = item,
            Some(_) => {}
            None => return Err(NO_SUCH_OVERLOAD.into()),
        }
    }
    Ok(best.clone())
}
