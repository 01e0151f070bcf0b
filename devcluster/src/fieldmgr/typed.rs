//! Values read through a schema (structured-merge-diff's `typed` package): which shape a value
//! takes, the path element of a list item, validation of an applied configuration, and the
//! field set a value sets (`ToFieldSet`).

use serde_json::Value;

use super::error::{go_fmt, go_quote};
use super::fieldset::FieldSet;
use super::path::{PathElement, value_eq};
use super::schema::{ListType, MapAtom, ScalarKind, Schema};

/// The shape chosen for one value (upstream `deduceAtom` + `handleAtom`).
#[derive(Clone)]
pub(crate) enum Shape<'a> {
    Scalar(ScalarKind),
    List(ListType, Schema<'a>),
    Map(MapAtom<'a>),
}

/// Keeps the atom alive while a [`Shape`] borrows its list type.
pub(crate) struct Resolved<'a> {
    atom: super::schema::Atom<'a>,
    kind: ScalarKind,
}

impl<'a> Resolved<'a> {
    pub fn new(schema: &Schema<'a>) -> Self {
        Resolved {
            atom: schema.atom(),
            kind: schema.scalar_kind(),
        }
    }

    /// The shape for a value; `None` (absent) or `null` take the schema's first shape.
    pub fn shape(&self, value: Option<&Value>) -> Shape<'a> {
        let atom = &self.atom;
        match value {
            Some(Value::Bool(_) | Value::Number(_) | Value::String(_)) if atom.scalar => {
                return Shape::Scalar(self.kind);
            }
            Some(Value::Array(_)) if atom.list.is_some() => {
                if let Some((t, e)) = &atom.list {
                    return Shape::List(t.clone(), *e);
                }
            }
            Some(Value::Object(_)) if atom.map.is_some() => {
                if let Some(m) = atom.map {
                    return Shape::Map(m);
                }
            }
            _ => {}
        }
        if let Some(m) = atom.map {
            Shape::Map(m)
        } else if atom.scalar {
            Shape::Scalar(self.kind)
        } else if let Some((t, e)) = &atom.list {
            Shape::List(t.clone(), *e)
        } else {
            Shape::Scalar(ScalarKind::Untyped)
        }
    }
}

/// The path element naming `item` in an associative list (or its index in an atomic one).
pub(crate) fn item_element(
    list: &ListType,
    element: &Schema,
    item: &Value,
    index: usize,
) -> Result<PathElement, String> {
    match list {
        ListType::Atomic => Ok(PathElement::Index(index)),
        ListType::Set => match item {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            Value::Array(_) => Err("not supported: associative list with lists as elements".into()),
            Value::Null => {
                Err("associative list without keys has an element that's an explicit null".into())
            }
            v => Ok(PathElement::Value(v.clone())),
        },
        ListType::Map(keys) => {
            let map = match item {
                Value::Object(map) => map,
                Value::Null => {
                    return Err("associative list with keys may not have a null element".into());
                }
                _ => return Err("associative list with keys may not have non-map elements".into()),
            };
            let mut fields: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|k| {
                    let value = map.get(k).cloned().or_else(|| element.key_default(k))?;
                    Some((k.clone(), value))
                })
                .collect();
            if fields.is_empty() {
                let quoted: Vec<String> = keys.iter().map(|k| go_quote(k)).collect();
                return Err(format!(
                    "associative list with keys has an element that omits all key fields [{}] (and doesn't have default values for any key fields)",
                    quoted.join(" ")
                ));
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields))
        }
    }
}

/// One validation problem, at a path rendered like upstream (`.spec.foo`).
struct Problem {
    path: String,
    message: String,
}

/// Validates an applied configuration against the schema, as upstream's `AsTyped` without
/// `AllowDuplicates`. Returns upstream's error text, or `None` when valid.
pub(crate) fn validate(value: &Value, schema: Schema) -> Option<String> {
    let mut problems = Vec::new();
    validate_at(value, schema, "", &mut problems);
    match problems.len() {
        0 => None,
        1 => Some(problems[0].render()),
        _ => {
            let lines: Vec<String> = problems
                .iter()
                .map(|p| format!("  {}", p.render()))
                .collect();
            Some(format!("errors:\n{}", lines.join("\n")))
        }
    }
}

impl Problem {
    fn render(&self) -> String {
        if self.path.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.path, self.message)
        }
    }
}

fn validate_at(value: &Value, schema: Schema, path: &str, problems: &mut Vec<Problem>) {
    let resolved = Resolved::new(&schema);
    let problem = |message: String| Problem {
        path: path.to_string(),
        message,
    };
    match resolved.shape(Some(value)) {
        Shape::Scalar(kind) => {
            if let Some(message) = scalar_problem(kind, value) {
                problems.push(problem(message));
            }
        }
        Shape::List(list, element) => {
            let items = match value {
                Value::Null => return,
                Value::Array(items) => items,
                other => {
                    return problems.push(problem(format!(
                        "expected list, got &{{{}}}",
                        go_fmt(other)
                    )));
                }
            };
            let mut seen: Vec<PathElement> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let pe = match item_element(&list, &element, item, i) {
                    Ok(pe) => pe,
                    Err(e) => return problems.push(problem(format!("element {i}: {e}"))),
                };
                if list != ListType::Atomic {
                    if seen.contains(&pe) {
                        problems.push(problem(format!("duplicate entries for key {pe}")));
                    }
                    seen.push(pe.clone());
                }
                validate_at(item, element, &format!("{path}{pe}"), problems);
            }
        }
        Shape::Map(map) => {
            let entries = match value {
                Value::Null => return,
                Value::Object(entries) => entries,
                other => {
                    return problems
                        .push(problem(format!("expected map, got &{{{}}}", go_fmt(other))));
                }
            };
            for (key, child) in entries {
                let child_path = format!("{path}.{key}");
                match map.child(key) {
                    Some(child_schema) => validate_at(child, child_schema, &child_path, problems),
                    None => {
                        problems.push(Problem {
                            path: child_path,
                            message: "field not declared in schema".into(),
                        });
                        return;
                    }
                }
            }
        }
    }
}

fn scalar_problem(kind: ScalarKind, value: &Value) -> Option<String> {
    let go_type = match value {
        Value::Null => return None,
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    };
    let scalar = matches!(value, Value::Bool(_) | Value::Number(_) | Value::String(_));
    match kind {
        ScalarKind::Numeric if !value.is_number() => {
            Some(format!("expected numeric (int or float), got {go_type}"))
        }
        ScalarKind::String if !value.is_string() => Some(format!(
            "expected string, got &value.valueUnstructured{{Value:{}}}",
            go_fmt(value)
        )),
        ScalarKind::Boolean if !value.is_boolean() => {
            Some(format!("expected boolean, got &{{{}}}", go_fmt(value)))
        }
        ScalarKind::Untyped if !scalar => {
            Some(format!("expected any scalar, got &{{{}}}", go_fmt(value)))
        }
        _ => None,
    }
}

/// The set of fields `value` sets (upstream `ToFieldSet`): every scalar leaf, every list item,
/// and the entries of maps that are not struct fields, empty maps and nulls.
pub(crate) fn to_field_set(value: &Value, schema: Schema) -> FieldSet {
    let mut set = FieldSet::new();
    field_set_at(value, schema, &mut Vec::new(), &mut set);
    set
}

fn field_set_at(value: &Value, schema: Schema, path: &mut Vec<PathElement>, set: &mut FieldSet) {
    let resolved = Resolved::new(&schema);
    match resolved.shape(Some(value)) {
        Shape::Scalar(_) => set.insert(path),
        Shape::List(list, element) => {
            if list == ListType::Atomic {
                return set.insert(path);
            }
            let Value::Array(items) = value else { return };
            let elements: Vec<Option<PathElement>> = items
                .iter()
                .enumerate()
                .map(|(i, item)| item_element(&list, &element, item, i).ok())
                .collect();
            let duplicated =
                |pe: &PathElement| elements.iter().flatten().filter(|e| *e == pe).count() > 1;
            for (item, pe) in items.iter().zip(&elements) {
                let Some(pe) = pe else { continue };
                path.push(pe.clone());
                if !duplicated(pe) {
                    field_set_at(item, element, path, set);
                }
                set.insert(path);
                path.pop();
            }
        }
        Shape::Map(map) => {
            if map.atomic {
                return set.insert(path);
            }
            let Value::Object(entries) = value else {
                return;
            };
            for (key, child) in entries {
                let field = map.field(key);
                let child_schema = field
                    .or_else(|| map.child(key))
                    .unwrap_or_else(Schema::deduced);
                path.push(PathElement::Field(key.clone()));
                field_set_at(child, child_schema, path, set);
                let empty_map = child.as_object().is_some_and(|m| m.is_empty());
                if child.is_null() || empty_map || field.is_none() {
                    set.insert(path);
                }
                path.pop();
            }
        }
    }
}

/// Whether two values are equal for structured-merge-diff (numbers compare numerically).
pub(crate) fn equal(a: &Value, b: &Value) -> bool {
    value_eq(a, b)
}
