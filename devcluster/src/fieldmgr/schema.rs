//! Read-only navigation of OpenAPI v3 schemas the way structured-merge-diff's converter
//! (kube-openapi `schemaconv`) sees them: `$ref` into a definitions map, list and map types,
//! preserve-unknown-fields, and the "deduced" / "untyped atomic" types for what has no schema.

use serde_json::{Map, Value};

pub(crate) use super::atom::{Atom, MapAtom, ScalarKind};

const REF_PREFIX: &str = "#/components/schemas/";
pub(crate) const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
pub(crate) const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";

/// A node of a schema, with the definitions its `$ref`s point into.
///
/// Built-in kinds use [`Schema::definition`] or [`Schema::for_kind`] over the `schemas` map of
/// `kubernetes.json`; a CRD version's `openAPIV3Schema` uses [`Schema::structural`]; a kind
/// without a schema uses [`Schema::deduced`], which merges maps granularly and lists atomically.
#[derive(Clone, Copy, Debug)]
pub struct Schema<'a> {
    pub(crate) defs: Option<&'a Map<String, Value>>,
    pub(crate) node: Node<'a>,
    /// Inside an `x-kubernetes-preserve-unknown-fields` subtree (inherited by inlined children).
    pub(crate) preserve: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Node<'a> {
    Json(&'a Value),
    /// Upstream `__untyped_deduced_`: any scalar, atomic lists, granular maps of itself.
    Deduced,
    /// Upstream `__untyped_atomic_`: any scalar, atomic lists and atomic maps.
    UntypedAtomic,
}

/// How a list merges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole (`x-kubernetes-list-type: atomic`, and the default).
    Atomic,
    /// Scalars merged as a set.
    Set,
    /// Objects merged by these key fields.
    Map(Vec<String>),
}

/// How an object with free-form keys (or a struct) merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapType {
    Granular,
    Atomic,
}

impl<'a> Schema<'a> {
    /// A schema node with optional definitions for its `$ref`s.
    pub fn new(defs: Option<&'a Map<String, Value>>, node: &'a Value) -> Self {
        Schema {
            defs,
            node: Node::Json(node),
            preserve: false,
        }
    }

    /// A named definition (`io.k8s.api.apps.v1.Deployment`) of a definitions map.
    pub fn definition(defs: &'a Map<String, Value>, name: &str) -> Option<Self> {
        defs.get(name).map(|node| Schema::new(Some(defs), node))
    }

    /// The definition carrying `x-kubernetes-group-version-kind` for this kind.
    pub fn for_kind(
        defs: &'a Map<String, Value>,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Option<Self> {
        defs.values()
            .find(|node| {
                node.get("x-kubernetes-group-version-kind")
                    .and_then(Value::as_array)
                    .is_some_and(|gvks| {
                        gvks.iter().any(|g| {
                            g["group"].as_str() == Some(group)
                                && g["version"].as_str() == Some(version)
                                && g["kind"].as_str() == Some(kind)
                        })
                    })
            })
            .map(|node| Schema::new(Some(defs), node))
    }

    /// A CRD version's structural `openAPIV3Schema` (no `$ref`s).
    pub fn structural(node: &'a Value) -> Self {
        Schema::new(None, node)
    }

    /// The schema upstream uses when a kind has none: granular maps, atomic lists.
    pub fn deduced() -> Schema<'a> {
        Schema {
            defs: None,
            node: Node::Deduced,
            preserve: false,
        }
    }

    /// Whether this is a typed (built-in) schema: one resolved through a definitions map.
    pub fn has_definitions(&self) -> bool {
        self.defs.is_some()
    }

    /// The raw node, before following `$ref`.
    pub fn node(&self) -> Option<&'a Value> {
        match self.node {
            Node::Json(v) => Some(v),
            _ => None,
        }
    }

    /// The node after following `$ref` and a single-element `allOf`.
    pub fn resolved(&self) -> Option<&'a Value> {
        let mut node = self.node()?;
        for _ in 0..16 {
            match self.ref_target(node) {
                Some((_, next)) => node = next,
                None => return Some(node),
            }
        }
        Some(node)
    }

    pub(crate) fn ref_target(&self, node: &'a Value) -> Option<(&'a str, &'a Value)> {
        let reference = node
            .get("$ref")
            .or_else(|| {
                let all = node.get("allOf")?.as_array()?;
                if all.len() == 1 {
                    all[0].get("$ref")
                } else {
                    None
                }
            })?
            .as_str()?;
        let name = reference.strip_prefix(REF_PREFIX).unwrap_or(reference);
        Some((name, self.defs?.get(name)?))
    }

    /// The definition name this node refers to, if it is a `$ref`.
    pub fn ref_name(&self) -> Option<&'a str> {
        let mut node = self.node()?;
        let mut last = None;
        for _ in 0..16 {
            match self.ref_target(node) {
                Some((name, next)) => {
                    last = Some(name);
                    node = next;
                }
                None => break,
            }
        }
        last
    }

    /// A child node, inheriting preserve-unknown-fields unless it is a named reference.
    pub(crate) fn child(&self, node: &'a Value) -> Schema<'a> {
        let named = self.ref_target(node).is_some();
        Schema {
            defs: self.defs,
            node: Node::Json(node),
            preserve: self.preserve && !named,
        }
    }

    /// An extension (or any keyword), looked up on the raw node first, then the resolved one.
    pub fn extension(&self, key: &str) -> Option<&'a Value> {
        let raw = self.node()?;
        raw.get(key).or_else(|| self.resolved()?.get(key))
    }

    pub fn property(&self, name: &str) -> Option<Schema<'a>> {
        self.atom().map.and_then(|m| m.field(name))
    }

    pub fn items(&self) -> Option<Schema<'a>> {
        self.atom().list.map(|(_, element)| element)
    }

    /// The type of keys that are not declared properties (`additionalProperties`, or the
    /// deduced type where unknown fields are preserved).
    pub fn additional_properties(&self) -> Option<Schema<'a>> {
        self.atom().map.and_then(|m| m.element)
    }

    pub fn list_type(&self) -> ListType {
        match self.atom().list {
            Some((kind, _)) => kind,
            None => ListType::Atomic,
        }
    }

    pub fn map_type(&self) -> MapType {
        match self.atom().map {
            Some(m) if m.atomic => MapType::Atomic,
            _ => MapType::Granular,
        }
    }

    /// Whether undeclared keys are kept (and merged as deduced values).
    pub fn preserves_unknown_fields(&self) -> bool {
        match self.node {
            Node::Json(_) => {
                self.preserve
                    || self.extension("x-kubernetes-preserve-unknown-fields")
                        == Some(&Value::Bool(true))
            }
            _ => true,
        }
    }

    /// The scalar kind structured-merge-diff validates values of this schema against.
    pub(crate) fn scalar_kind(&self) -> ScalarKind {
        if matches!(self.ref_name(), Some(QUANTITY)) {
            return ScalarKind::Untyped;
        }
        let Some(node) = self.resolved() else {
            return ScalarKind::Untyped;
        };
        let format = node.get("format").and_then(Value::as_str).unwrap_or("");
        match node.get("type").and_then(Value::as_str) {
            Some("integer" | "number") => ScalarKind::Numeric,
            Some("boolean") => ScalarKind::Boolean,
            Some("string") if format.is_empty() || format == "byte" => ScalarKind::String,
            _ => ScalarKind::Untyped,
        }
    }

    pub fn nullable(&self) -> bool {
        self.extension("nullable") == Some(&Value::Bool(true))
    }

    /// `x-kubernetes-patch-strategy`, split on commas.
    pub fn patch_strategies(&self) -> Vec<&'a str> {
        self.extension("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .map(|s| {
                s.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn patch_merge_key(&self) -> Option<&'a str> {
        self.extension("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str)
    }

    /// The value a list-map key field takes when an element omits it: the schema's `default`,
    /// or upstream's `+default="TCP"` on port protocols, which `kubernetes.json` lacks.
    pub(crate) fn key_default(&self, field: &str) -> Option<Value> {
        let map = self.atom().map?;
        let schema = map.field(field)?;
        if let Some(default) = schema.extension("default") {
            return Some(default.clone());
        }
        let owner = self.ref_name()?;
        let ports = [
            "io.k8s.api.core.v1.ContainerPort",
            "io.k8s.api.core.v1.ServicePort",
        ];
        (field == "protocol" && ports.contains(&owner)).then(|| Value::String("TCP".into()))
    }

    /// The Go struct name upstream's strategic-merge errors print (`DeploymentSpec`).
    pub(crate) fn struct_name(&self) -> &'a str {
        self.ref_name()
            .and_then(|n| n.rsplit('.').next())
            .unwrap_or("")
    }
}
