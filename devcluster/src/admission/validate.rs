//! The order in which the API server checks a custom resource against its schema
//! (`customResourceStrategy.Validate`/`ValidateUpdate` in apiextensions-apiserver
//! `pkg/registry/customresource/strategy.go`): OpenAPI value validation, embedded resources,
//! list-type sets and maps, then CEL rules unless an earlier error makes them unreliable.

use serde_json::Value;

use super::errors::{ErrorKind, FieldError};
use super::path::FieldPath;
use super::schema::Schema;
use super::{cel, embedded, listtype, openapi};

const RULES_NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Validate a whole custom resource (apiVersion, kind, metadata, spec, status, ...) against a
/// CRD version's `openAPIV3Schema`, as kube-apiserver 1.35 does after pruning and defaulting.
///
/// `old` is the stored object on update: errors inside unchanged values are ratcheted away,
/// list-type uniqueness is only enforced if the old object satisfied it, and transition rules
/// (`oldSelf`) run where an old value exists at their path (always with `optionalOldSelf`).
/// Type and object-meta checks of the root (`kind`, `apiVersion`, `metadata.name`) are the
/// server's, not part of this.
pub fn validate(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = openapi::validate(schema, object, old);
    errors.extend(embedded::validate(schema, object));
    let list_errors_before = old.map_or(0, |old| listtype::validate(schema, old).len());
    if list_errors_before == 0 {
        errors.extend(listtype::validate(schema, object));
    }
    if cel::has_rules(Schema::new(schema)) {
        let blocking = errors.iter().any(|e| {
            matches!(
                e.kind,
                ErrorKind::NotSupported
                    | ErrorKind::Required
                    | ErrorKind::TooLong
                    | ErrorKind::TooMany
                    | ErrorKind::TypeInvalid
            )
        });
        if blocking {
            errors.push(FieldError::invalid(
                &FieldPath::root(),
                Value::Null,
                RULES_NOT_CHECKED,
            ));
        } else {
            errors.extend(cel::validate(schema, object, old));
        }
    }
    errors
}
