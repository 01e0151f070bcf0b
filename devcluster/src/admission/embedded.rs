//! Checks of `x-kubernetes-embedded-resource` objects below the root, as
//! apiextensions-apiserver `pkg/apiserver/schema/objectmeta/validation.go` runs them:
//! `apiVersion` and `kind` present and well-formed, `metadata` an object whose name,
//! generateName, namespace and generation pass `ValidateObjectMeta`.

use serde_json::{Map, Value, json};

use super::errors::FieldError;
use super::path::FieldPath;
use super::schema::{Schema, sorted_keys};

const DNS1035_FORMAT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_MESSAGE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const DNS1123_FORMAT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";

/// `objectmeta.Validate(nil, object, schema, false)`.
pub fn validate(schema: &Value, object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    walk(&FieldPath::root(), Schema::new(schema), object, &mut errors);
    errors
}

fn walk(path: &FieldPath, schema: Schema, value: &Value, errors: &mut Vec<FieldError>) {
    match value {
        Value::Object(map) => {
            if schema.embedded_resource() {
                validate_embedded(path, map, errors);
            }
            for key in sorted_keys(map) {
                let member = &map[key.as_str()];
                if let Some(property) = schema.property(key) {
                    walk(&path.child(key), property, member, errors);
                } else if let Some(values) = schema.additional_properties_schema() {
                    walk(&path.key(key), values, member, errors);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = schema.items() else {
                return;
            };
            for (index, item) in items.iter().enumerate() {
                walk(&path.index(index), item_schema, item, errors);
            }
        }
        _ => {}
    }
}

/// `validation.RegexError` with examples.
fn regex_error(message: &str, format: &str, examples: &[&str]) -> String {
    let quoted: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{message} (e.g. {}regex used for validation is '{format}')",
        quoted.join("or ")
    )
}

fn label_errors(value: &str, format: &str, message: &str, examples: &[&str]) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > 63 {
        errors.push("must be no more than 63 characters".to_string());
    }
    let valid = regex::Regex::new(&format!("^{format}$")).is_ok_and(|re| re.is_match(value));
    if !valid {
        errors.push(regex_error(message, format, examples));
    }
    errors
}

fn validate_embedded(path: &FieldPath, map: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    for required in ["apiVersion", "kind"] {
        if !map.contains_key(required) {
            errors.push(FieldError::required(&path.child(required), ""));
        }
    }
    for key in sorted_keys(map) {
        let value = &map[key.as_str()];
        let field = path.child(key);
        match key.as_str() {
            "apiVersion" => match value.as_str() {
                None => errors.push(FieldError::invalid(
                    &field,
                    value.clone(),
                    "must be a string",
                )),
                Some("") => {
                    errors.push(FieldError::invalid(&field, json!(""), "must not be empty"))
                }
                Some(version) if version.matches('/').count() > 1 && version != "/" => {
                    let detail = format!("unexpected GroupVersion string: {version}");
                    errors.push(FieldError::invalid(&field, json!(version), &detail));
                }
                Some(_) => {}
            },
            "kind" => match value.as_str() {
                None => errors.push(FieldError::invalid(
                    &field,
                    value.clone(),
                    "must be a string",
                )),
                Some("") => {
                    errors.push(FieldError::invalid(&field, json!(""), "must not be empty"))
                }
                Some(kind) => {
                    let problems = label_errors(
                        &kind.to_lowercase(),
                        DNS1035_FORMAT,
                        DNS1035_MESSAGE,
                        &["my-name", "abc-123"],
                    );
                    if !problems.is_empty() {
                        let detail = format!(
                            "may have mixed case, but should otherwise match: {}",
                            problems.join(",")
                        );
                        errors.push(FieldError::invalid(&field, json!(kind), &detail));
                    }
                }
            },
            "metadata" => validate_metadata(&field, value, errors),
            _ => {}
        }
    }
}

fn path_segment_errors(name: &str, prefix: bool) -> Vec<String> {
    if !prefix && (name == "." || name == "..") {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

fn validate_metadata(path: &FieldPath, metadata: &Value, errors: &mut Vec<FieldError>) {
    let Some(meta) = metadata.as_object() else {
        let detail = "json: cannot unmarshal into Go value of type v1.ObjectMeta";
        errors.push(FieldError::invalid(path, metadata.clone(), detail));
        return;
    };
    let text = |field: &str| meta.get(field).and_then(Value::as_str).unwrap_or("");
    let generate_name = text("generateName");
    if !generate_name.is_empty() {
        for message in path_segment_errors(generate_name, true) {
            errors.push(FieldError::invalid(
                &path.child("generateName"),
                json!(generate_name),
                &message,
            ));
        }
    }
    // An embedded object without a name is validated as if it were called "fakename".
    let name = text("name");
    for message in path_segment_errors(name, false) {
        errors.push(FieldError::invalid(
            &path.child("name"),
            json!(name),
            &message,
        ));
    }
    let namespace = text("namespace");
    if !namespace.is_empty() {
        for message in label_errors(
            namespace,
            DNS1123_FORMAT,
            DNS1123_MESSAGE,
            &["my-name", "123-abc"],
        ) {
            errors.push(FieldError::invalid(
                &path.child("namespace"),
                json!(namespace),
                &message,
            ));
        }
    }
    if let Some(generation) = meta
        .get("generation")
        .and_then(Value::as_i64)
        .filter(|g| *g < 0)
    {
        errors.push(FieldError::invalid(
            &path.child("generation"),
            json!(generation),
            "must be greater than or equal to 0",
        ));
    }
}
