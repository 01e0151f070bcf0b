//! `x-kubernetes-validations` rules, evaluated as apiextensions-apiserver
//! `pkg/apiserver/schema/cel/validation.go` does in Kubernetes 1.35: rules of every node that
//! has a value, `oldSelf` only where a correlated old value exists (unless `optionalOldSelf`),
//! `fieldPath`, `reason`, `messageExpression`, and ratcheting of unchanged values on update.
//! The cost budget is not enforced. Rules run on a worker thread with a large stack, since
//! the cel crate parses and evaluates recursively.

mod compile;
mod duration;
mod field_path;
mod library;
mod strings;
mod time;
mod values;

use serde_json::{Value, json};

use super::errors::FieldError;
use super::path::FieldPath;
use super::ratchet::{Correlation, map_list_lookup};
use super::schema::{Rule, Schema, sorted_keys};
use compile::{Compiled, Failure};

pub use duration::parse_go_duration;

/// Whether any node (not counting `allOf` branches, as upstream) has rules.
pub fn has_rules(schema: Schema) -> bool {
    schema.has_rules()
        || schema.items().is_some_and(has_rules)
        || schema.additional_properties_schema().is_some_and(has_rules)
        || schema
            .property_names()
            .into_iter()
            .any(|name| schema.property(name).is_some_and(has_rules))
}

/// Stack of the thread rules run on: enough for the deepest and longest rules `compile`
/// accepts, even in a debug build (only the pages used are committed).
const EVALUATION_STACK_BYTES: usize = 256 << 20;

/// All rule failures of `object` (and, on update, of the transition from `old`).
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("admission-cel".into())
            .stack_size(EVALUATION_STACK_BYTES)
            .spawn_scoped(scope, || validate_on_this_thread(schema, object, old));
        let failed = |detail: String| vec![FieldError::internal(&FieldPath::root(), &detail)];
        match worker {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| failed("the CEL rule evaluator failed".into())),
            Err(error) => failed(format!("could not start the CEL rule evaluator: {error}")),
        }
    })
}

fn validate_on_this_thread(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let schema = Schema::new(schema);
    let ratchet = Ratchet {
        current: old.map(|old| Correlation::new(object, old, Some(schema))),
        parent: None,
    };
    let mut errors = Vec::new();
    let node = NodeRef {
        validation: schema,
        node: schema,
        resource: true,
    };
    walk(node, object, old, &FieldPath::root(), ratchet, &mut errors);
    errors
}

/// The schema holding the rules and the schema describing the value (they differ in `allOf`).
#[derive(Clone, Copy)]
struct NodeRef<'a> {
    validation: Schema<'a>,
    node: Schema<'a>,
    resource: bool,
}

/// Ratcheting state (`ratchetingOptions` upstream).
#[derive(Clone, Copy, Default)]
struct Ratchet<'a> {
    current: Option<Correlation<'a>>,
    parent: Option<Correlation<'a>>,
}

impl<'a> Ratchet<'a> {
    fn key(self, field: &str) -> Self {
        let Some(current) = self.current else {
            return self;
        };
        if self.parent.is_none() && (field == "apiVersion" || field == "kind") {
            return Ratchet::default();
        }
        Ratchet {
            current: current.key(field),
            parent: Some(current),
        }
    }

    fn index(self, index: usize) -> Self {
        let Some(current) = self.current else {
            return self;
        };
        Ratchet {
            current: current.index(index),
            parent: Some(current),
        }
    }

    fn unchanged(self) -> bool {
        match self.current {
            Some(current) => current.deep_equal(),
            None => self.parent.is_some_and(|p| p.deep_equal()),
        }
    }
}

fn walk(
    node: NodeRef,
    value: &Value,
    old: Option<&Value>,
    path: &FieldPath,
    ratchet: Ratchet,
    errors: &mut Vec<FieldError>,
) {
    if value.is_null() {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    evaluate_rules(node, value, old, path, ratchet, errors);
    for branch in node.validation.subschemas("allOf") {
        let branch_node = NodeRef {
            validation: branch,
            ..node
        };
        walk(
            branch_node,
            value,
            old,
            path,
            Ratchet {
                current: None,
                parent: ratchet.parent,
            },
            errors,
        );
    }
    match value {
        Value::Array(items) => {
            let (Some(validation), Some(item_node)) = (node.validation.items(), node.node.items())
            else {
                return;
            };
            let old_items = old.and_then(Value::as_array);
            for (index, item) in items.iter().enumerate() {
                let old_item = old_items.and_then(|o| map_list_lookup(node.node, o, item));
                let child = NodeRef {
                    validation,
                    node: item_node,
                    resource: item_node.embedded_resource(),
                };
                walk(
                    child,
                    item,
                    old_item,
                    &path.index(index),
                    ratchet.index(index),
                    errors,
                );
            }
        }
        Value::Object(map) => {
            let old_map = old.and_then(Value::as_object);
            let validation_values = node.validation.additional_properties_schema();
            if let (Some(validation), Some(values)) =
                (validation_values, node.node.additional_properties_schema())
            {
                for key in sorted_keys(map) {
                    let child = NodeRef {
                        validation,
                        node: values,
                        resource: values.embedded_resource(),
                    };
                    let old_member = old_map.and_then(|o| o.get(key.as_str()));
                    walk(
                        child,
                        &map[key.as_str()],
                        old_member,
                        &path.key(key),
                        ratchet.key(key),
                        errors,
                    );
                }
            }
            for key in sorted_keys(map) {
                let (Some(validation), Some(property)) =
                    (node.validation.property(key), node.node.property(key))
                else {
                    continue;
                };
                let child = NodeRef {
                    validation,
                    node: property,
                    resource: property.embedded_resource(),
                };
                let old_member = old_map.and_then(|o| o.get(key.as_str()));
                walk(
                    child,
                    &map[key.as_str()],
                    old_member,
                    &path.child(key),
                    ratchet.key(key),
                    errors,
                );
            }
        }
        _ => {}
    }
}

fn evaluate_rules(
    node: NodeRef,
    value: &Value,
    old: Option<&Value>,
    path: &FieldPath,
    ratchet: Ratchet,
    errors: &mut Vec<FieldError>,
) {
    let rules = node.validation.rules();
    if rules.is_empty() {
        return;
    }
    let type_name = node.node.type_name();
    let self_value = values::to_cel(value, Some(node.node), node.resource);
    let old_value = old.map(|o| values::to_cel(o, Some(node.node), node.resource));
    for rule in rules.iter().filter(|r| !r.rule.trim().is_empty()) {
        let compiled = match compile::compile(&rule.rule) {
            Ok(compiled) => compiled,
            Err(detail) => {
                errors.push(FieldError::invalid(
                    path,
                    json!(type_name),
                    &format!("rule compile error: {detail}"),
                ));
                continue;
            }
        };
        if compiled.uses_old_self && old_value.is_none() && !rule.optional_old_self {
            continue;
        }
        let old_binding = match (&old_value, rule.optional_old_self) {
            (Some(old), true) => compile::OldSelf::Present(old.clone()),
            (None, true) => compile::OldSelf::Absent,
            (Some(old), false) => compile::OldSelf::Plain(old.clone()),
            (None, false) => compile::OldSelf::Undeclared,
        };
        let detail = match compiled.evaluate(&self_value, &old_binding) {
            Ok(true) => continue,
            Ok(false) => None,
            Err(Failure::Compile(detail)) => Some(format!("rule compile error: {detail}")),
            Err(Failure::NoSuchOverload) => Some(format!(
                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {}",
                rule_error_string(rule)
            )),
            Err(Failure::Runtime(message)) => Some(format!(
                "{message} evaluating rule: {}",
                rule_error_string(rule)
            )),
        };
        if let Some(detail) = detail {
            errors.push(FieldError::invalid(path, json!(type_name), &detail));
            continue;
        }
        let message_binding = match &old_value {
            Some(old) => compile::OldSelf::Plain(old.clone()),
            None => compile::OldSelf::Undeclared,
        };
        let failure = rule_failure(
            node,
            rule,
            &compiled,
            value,
            path,
            &self_value,
            &message_binding,
        );
        if compiled.uses_old_self || !ratchet.unchanged() {
            errors.push(failure);
        }
    }
}

fn rule_error_string(rule: &Rule) -> String {
    if rule.message.is_empty() {
        rule.rule.trim().to_string()
    } else {
        rule.message.trim().to_string()
    }
}

/// The error of a rule that evaluated to false (`fieldErrorForReason`).
fn rule_failure(
    node: NodeRef,
    rule: &Rule,
    compiled: &Compiled,
    value: &Value,
    path: &FieldPath,
    self_value: &cel::Value,
    old: &compile::OldSelf,
) -> FieldError {
    let path = match field_path::normalized(&rule.field_path, node.node) {
        Some(relative) if !relative.is_empty() => path.child(&relative),
        _ => path.clone(),
    };
    let detail = (!rule.message_expression.is_empty())
        .then(|| compiled.message(&rule.message_expression, self_value, old))
        .flatten()
        .unwrap_or_else(|| {
            if rule.message.is_empty() {
                format!("failed rule: {}", rule_error_string(rule))
            } else {
                rule.message.trim().to_string()
            }
        });
    let shown = match node.node.type_name() {
        "object" | "array" => None,
        _ => Some(value.clone()),
    };
    match rule.reason.as_str() {
        "FieldValueForbidden" => FieldError::forbidden(&path, &detail),
        "FieldValueRequired" => FieldError::required(&path, &detail),
        "FieldValueDuplicate" => FieldError::duplicate(&path, shown),
        _ => FieldError::new(super::errors::ErrorKind::Invalid, &path, shown, &detail),
    }
}

#[cfg(test)]
mod tests;
