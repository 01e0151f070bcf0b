//! Patches, server-side apply and `metadata.managedFields` as a kube-apiserver computes them,
//! for an in-memory API server that real clients (kubectl, kube-rs, Helm) talk to.
//!
//! The behaviour follows upstream: `k8s.io/apiserver` `handlers/patch.go` for status codes and
//! messages, `k8s.io/apimachinery` `strategicpatch` and `managedfields` for strategic merge
//! patches and field managers, and `sigs.k8s.io/structured-merge-diff` for the merge, prune and
//! conflict rules of server-side apply.
//!
//! # Caller contract
//!
//! Every function is pure: it takes the stored object and returns the next one. Around them the
//! API server does what upstream's handler and registry do:
//!
//! * **Manager names.** Pass `fieldManager` from the query. For non-apply writes, when it is
//!   empty, use the User-Agent's first segment (`kubectl/v1.32.0 (linux/amd64) ...` →
//!   `kubectl`) as upstream does; check any given name with [`validate_field_manager`]. Apply
//!   checks its own (422 when missing).
//! * **Patch types.** `application/json-patch+json` → [`json_patch`];
//!   `application/merge-patch+json` → [`merge_patch`]; `application/strategic-merge-patch+json`
//!   → [`strategic_merge_patch`] for built-in kinds only, custom resources answer
//!   [`PatchError::unsupported_patch_type`] with [`CUSTOM_RESOURCE_PATCH_TYPES`];
//!   `application/apply-patch+yaml` → decode the YAML to JSON, then [`apply`]. A JSON, merge or
//!   strategic patch of a missing object is a 404 (the caller's); apply creates it.
//! * **Subresources.** For a kind with a status subresource (or a `/status` write), call
//!   [`reset_fields`] so a write only changes what its endpoint owns: for [`record_update`],
//!   on the new object with the stored one as `old`, *before* the call; for [`apply`], on the
//!   applied configuration with `old = None` before the call, and on the result with the stored
//!   object after it. Pass `subresource: Some("status")` to both functions for `/status` writes.
//! * **Non-apply writes.** After computing the new object (create body, update body, or a
//!   patched object), call [`record_update`] with the stored object (`None` for a create),
//!   then fill in system fields (uid, resourceVersion, generation, creationTimestamp) and
//!   validate. The stored object must keep its `uid`.
//! * **After apply.** Apply to a missing object returns a new object: set name/namespace
//!   checks, uid, creationTimestamp, defaults and validation as for a create. `now` is the
//!   RFC 3339 time (seconds) recorded in managedFields.
//!
//! Errors carry upstream's code, reason and message ([`PatchError::to_status`]).

mod apply;
mod atom;
mod compare;
mod crd;
mod error;
mod fieldset;
mod managed;
mod merge;
mod patch;
mod path;
mod schema;
mod strategic;
mod strategic_list;
mod typed;
mod update;

#[cfg(test)]
mod testutil;

pub use apply::{apply, validate_field_manager};
pub use compare::{Comparison, compare};
pub use crd::custom_resource_schema;
pub use error::{CUSTOM_RESOURCE_PATCH_TYPES, Cause, PatchError};
pub use fieldset::FieldSet;
pub use managed::{Managed, ManagedEntry, ManagerId, Operation};
pub use merge::{merge, remove_items};
pub use patch::{json_patch, merge_patch};
pub use path::{Path, PathElement};
pub use schema::{ListType, MapType, Schema};
pub use strategic::strategic_merge_patch;
pub use update::{record_update, reset_fields};

use serde_json::Value;

/// The set of fields `object` sets, per `schema`: every scalar leaf, list item and free-form
/// map entry (structured-merge-diff's `ToFieldSet`).
pub fn fields_of(object: &Value, schema: Schema) -> FieldSet {
    typed::to_field_set(object, schema)
}
