//! OpenAPI value validation of a custom resource, as kube-openapi's `SchemaValidator`
//! (`pkg/validation/validate/schema.go`, `schema_props.go`, `slice_validator.go`,
//! `object_validator.go`) runs it on the schema apiextensions-apiserver converts from the CRD
//! (`pkg/apiserver/validation/validation.go`), including update ratcheting
//! (`pkg/apiserver/validation/ratcheting.go`).

mod formats;
mod keywords;
mod result;

use serde_json::{Value, json};

use super::errors::FieldError;
use super::goformat::quote;
use super::ratchet::Correlation;
use super::schema::{AdditionalProperties, Schema, sorted_keys};
use keywords::{Kind, Num, kind_of};
use result::{Code, Issue, Outcome};

/// One schema node as kube-openapi sees it after apiextensions' conversion: int-or-string
/// becomes `type: [integer, string]`, formats the server does not check are dropped.
pub struct Node<'a> {
    schema: Schema<'a>,
    types: Vec<String>,
    format: String,
    /// The type and format the number validator range-checks against.
    number_type: &'static str,
    number_format: &'static str,
}

impl<'a> Node<'a> {
    fn new(schema: Schema<'a>) -> Self {
        let type_name = schema.type_name();
        let types: Vec<String> = if schema.int_or_string() {
            vec!["integer".into(), "string".into()]
        } else if type_name.is_empty() {
            Vec::new()
        } else {
            vec![type_name.to_string()]
        };
        let single = if types.len() == 1 {
            types[0].as_str()
        } else {
            ""
        };
        let raw = schema.format();
        let keep = match single {
            "" | "string" => formats::is_supported(raw),
            "integer" => raw == "int32" || raw == "int64",
            "number" => raw == "float" || raw == "double",
            _ => false,
        };
        let format = if keep { raw.to_string() } else { String::new() };
        let (number_type, number_format) = match (single, format.as_str()) {
            ("integer", "int32") => ("integer", "int32"),
            ("integer", "int64") => ("integer", "int64"),
            ("integer", _) => ("integer", ""),
            ("number", "float") => ("number", "float"),
            ("number", "double") => ("number", "double"),
            ("number", _) => ("number", ""),
            _ => ("", ""),
        };
        Node {
            schema,
            types,
            format,
            number_type,
            number_format,
        }
    }
}

/// All OpenAPI errors of `object` (as field errors, in kube-openapi's order). With `old`,
/// errors inside values that did not change are dropped (CRD validation ratcheting).
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let schema = Schema::new(schema);
    let correlation = old.map(|old| Correlation::new(object, old, Some(schema)));
    result::to_field_errors(validate_node(schema, object, "", correlation, true))
}

/// `SchemaValidator.Validate` (and `ratchetingValueValidator.Validate` when correlated).
fn validate_node(
    schema: Schema,
    data: &Value,
    path: &str,
    correlation: Option<Correlation>,
    root: bool,
) -> Outcome {
    let node = Node::new(schema);
    let mut result = Outcome::default();
    let kind = kind_of(data);
    if kind == Kind::Null {
        result.merge(keywords::check_type(&node, data, path));
        result.merge(keywords::check_enum(&node, data, path));
    } else {
        if !node.types.is_empty() || !node.format.is_empty() {
            result.merge(keywords::check_type(&node, data, path));
            result.inc();
        }
        result.merge(check_combinators(&node, data, path, correlation, root));
        result.inc();
        if let Value::String(text) = data {
            result.merge(keywords::check_string(&node, text, path));
            result.inc();
            if !node.format.is_empty() {
                result.merge(keywords::check_format(&node, text, path));
                result.inc();
            }
        }
        if let Value::Number(n) = data {
            result.merge(keywords::check_number(&node, Num::of(n), path));
            result.inc();
        }
        if let Value::Array(items) = data {
            result.merge(check_items(&node, items, path, correlation));
            result.inc();
        }
        result.merge(keywords::check_enum(&node, data, path));
        result.inc();
        if let Value::Object(_) = data {
            result.merge(check_object(&node, data, path, correlation, root));
            result.inc();
        }
        result.inc();
    }
    if !result.is_valid() && correlation.is_some_and(|c| c.deep_equal()) {
        result.errors.clear();
    }
    result
}

/// `schemaPropsValidator.Validate`: `anyOf`, `oneOf`, `allOf`, `not` (same path).
fn check_combinators(
    node: &Node,
    data: &Value,
    path: &str,
    correlation: Option<Correlation>,
    root: bool,
) -> Outcome {
    let run = |s: Schema| validate_node(s, data, path, correlation, root);
    let mut main = Outcome::default();
    let any_of = node.schema.subschemas("anyOf");
    if !any_of.is_empty() {
        let mut best: Option<Outcome> = None;
        let mut first_success: Option<Outcome> = None;
        for candidate in any_of {
            let outcome = run(candidate);
            if outcome.is_valid() {
                best = None;
                first_success = Some(outcome);
                break;
            }
            if best
                .as_ref()
                .is_none_or(|b| outcome.match_count > b.match_count)
            {
                best = Some(outcome);
            }
        }
        if first_success.is_none() {
            main.add(Issue::Other(format!(
                "{} must validate at least one schema (anyOf)",
                quote(path)
            )));
        }
        if let Some(outcome) = best.or(first_success) {
            main.merge(outcome);
        }
    }
    let one_of = node.schema.subschemas("oneOf");
    if !one_of.is_empty() {
        let mut best: Option<Outcome> = None;
        let mut first_success: Option<Outcome> = None;
        let mut validated = 0;
        for candidate in one_of {
            let outcome = run(candidate);
            if outcome.is_valid() {
                validated += 1;
                best = None;
                first_success.get_or_insert(outcome);
            } else if validated == 0
                && best
                    .as_ref()
                    .is_none_or(|b| outcome.match_count > b.match_count)
            {
                best = Some(outcome);
            }
        }
        if validated != 1 {
            let detail = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            main.add(Issue::Other(format!(
                "{} must validate one and only one schema (oneOf). {detail}",
                quote(path)
            )));
            if let Some(outcome) = best {
                main.merge(outcome);
            }
        } else if let Some(outcome) = first_success {
            main.merge(outcome);
        }
    }
    let all_of = node.schema.subschemas("allOf");
    if !all_of.is_empty() {
        let total = all_of.len();
        let mut validated = 0;
        for candidate in all_of {
            let outcome = run(candidate);
            if outcome.is_valid() {
                validated += 1;
            }
            main.merge(outcome);
        }
        if validated != total {
            let detail = if validated == 0 {
                ". None validated"
            } else {
                ""
            };
            main.add(Issue::Other(format!(
                "{} must validate all the schemas (allOf){detail}",
                quote(path)
            )));
        }
    }
    if let Some(negated) = node.schema.not()
        && run(negated).is_valid()
    {
        let message = format!("{} must not validate the schema (not)", quote(path));
        main.add(Issue::Other(message));
    }
    main.inc();
    main
}

/// `schemaSliceValidator.Validate`: items, minItems, maxItems, uniqueItems.
fn check_items(
    node: &Node,
    items: &[Value],
    path: &str,
    correlation: Option<Correlation>,
) -> Outcome {
    let mut result = Outcome::default();
    if let Some(item_schema) = node.schema.items() {
        for (index, item) in items.iter().enumerate() {
            let child = correlation.and_then(|c| c.index(index));
            result.merge(validate_node(
                item_schema,
                item,
                &format!("{path}[{index}]"),
                child,
                false,
            ));
        }
    }
    let size = items.len() as i64;
    if let Some(min) = node.schema.count("minItems").filter(|min| size < *min) {
        let message = format!("{path} in body should have at least {min} items");
        result.add(Issue::new(Code::MinItems, path, Some(json!(size)), message).with_limit(min));
    }
    if let Some(max) = node.schema.count("maxItems").filter(|max| size > *max) {
        let message = format!("{path} in body should have at most {max} items");
        result.add(Issue::new(Code::MaxItems, path, Some(json!(size)), message).with_limit(max));
    }
    if node.schema.unique_items() {
        let duplicated = items
            .iter()
            .enumerate()
            .any(|(i, item)| items[..i].contains(item));
        if duplicated {
            let message = format!("{path} in body shouldn't contain duplicates");
            result.add(Issue::new(Code::Unique, path, None, message));
        }
    }
    result.inc();
    result
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `objectValidator.Validate`: property counts, additional properties, properties, required.
fn check_object(
    node: &Node,
    data: &Value,
    path: &str,
    correlation: Option<Correlation>,
    root: bool,
) -> Outcome {
    let mut result = Outcome::default();
    let Value::Object(map) = data else {
        return result;
    };
    let schema = node.schema;
    let size = map.len() as i64;
    if let Some(min) = schema.count("minProperties").filter(|min| size < *min) {
        let message = format!("{path} in body should have at least {min} properties");
        result.add(
            Issue::new(Code::TooFewProperties, path, Some(json!(size)), message).with_limit(min),
        );
    }
    if let Some(max) = schema.count("maxProperties").filter(|max| size > *max) {
        let message = format!("{path} in body should have at most {max} properties");
        result.add(
            Issue::new(Code::TooManyProperties, path, Some(json!(size)), message).with_limit(max),
        );
    }
    // Ratcheting never applies to apiVersion and kind of the resource itself.
    let member_correlation = |key: &str| {
        if root && (key == "apiVersion" || key == "kind") {
            None
        } else {
            correlation.and_then(|c| c.key(key))
        }
    };
    match schema.additional_properties() {
        AdditionalProperties::Allowed(false) => {
            for key in sorted_keys(map) {
                if schema.property(key).is_none() {
                    let message = format!("{path}.{key} in body is a forbidden property");
                    result.add(Issue::new(
                        Code::UnallowedProperty,
                        path,
                        Some(json!(key)),
                        message,
                    ));
                }
            }
        }
        AdditionalProperties::Schema(values) => {
            for key in sorted_keys(map) {
                if schema.property(key).is_none() {
                    let member = &map[key.as_str()];
                    let member_path = format!("{path}.{key}");
                    result.merge(validate_node(
                        values,
                        member,
                        &member_path,
                        member_correlation(key),
                        false,
                    ));
                }
            }
        }
        _ => {}
    }
    for name in schema.property_names() {
        let (Some(property), Some(member)) = (schema.property(name), map.get(name)) else {
            continue;
        };
        let member_path = child_path(path, name);
        result.merge(validate_node(
            property,
            member,
            &member_path,
            member_correlation(name),
            false,
        ));
    }
    for name in schema.required() {
        if !map.contains_key(name) {
            let required_path = format!("{path}.{name}");
            let message = format!("{required_path} in body is required");
            result.add(Issue::new(Code::Required, &required_path, None, message));
        }
    }
    result
}

#[cfg(test)]
mod tests;
