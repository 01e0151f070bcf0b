//! Admission of custom resources as kube-apiserver 1.35 (the version devcluster reports)
//! does it for a CRD version's structural `openAPIV3Schema`: [`prune`] unknown fields,
//! [`apply_defaults`], then [`validate`] (OpenAPI keywords, embedded resources, list types,
//! CEL `x-kubernetes-validations`, ratcheting on update), and [`invalid_message`] /
//! [`invalid_status`] for the 422 answer. Messages follow the upstream sources byte for byte
//! where they can be reproduced; every module names the files it follows.
//!
//! The server's order on create and update is: prune, default, validate. Type meta
//! (`kind`/`apiVersion` must match the CRD) and `metadata` of the resource itself are the
//! server's to check. Rule cost budgets are not enforced.

mod cel;
mod defaults;
mod embedded;
mod errors;
mod goformat;
mod goregex;
mod listtype;
mod openapi;
mod path;
mod prune;
mod ratchet;
mod schema;
mod validate;

pub use defaults::apply_defaults;
pub use errors::{ErrorKind, FieldError, invalid_message, invalid_status};
pub use prune::prune;
pub use validate::validate;

#[cfg(test)]
mod tests;
