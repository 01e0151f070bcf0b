//! The shapes a schema node allows (structured-merge-diff's atoms: scalar, list, map), built
//! the way kube-openapi's `schemaconv` converts OpenAPI: list relationships from
//! `x-kubernetes-list-type` or the patch strategy, map types, and the untyped fallbacks.

use serde_json::Value;

use super::schema::{ListType, Node, QUANTITY, RAW_EXTENSION, Schema};

/// What a scalar field accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScalarKind {
    Numeric,
    String,
    Boolean,
    Untyped,
}

/// The shapes a value under this schema may take (a schema without `type` allows all three).
pub(crate) struct Atom<'a> {
    pub scalar: bool,
    pub list: Option<(ListType, Schema<'a>)>,
    pub map: Option<MapAtom<'a>>,
}

/// An object type: its struct fields (from `properties`) and the type of any other key.
#[derive(Clone, Copy)]
pub(crate) struct MapAtom<'a> {
    pub atomic: bool,
    pub(crate) owner: Schema<'a>,
    pub(crate) element: Option<Schema<'a>>,
}

impl<'a> MapAtom<'a> {
    /// The schema of a declared property.
    pub fn field(&self, name: &str) -> Option<Schema<'a>> {
        let node = self.owner.resolved()?;
        let prop = node.get("properties")?.get(name)?;
        Some(self.owner.child(prop))
    }

    /// The schema of any key: a property, or else the type of undeclared keys.
    pub fn child(&self, name: &str) -> Option<Schema<'a>> {
        self.field(name).or(self.element)
    }
}

impl<'a> Schema<'a> {
    /// The shapes this schema allows, as structured-merge-diff's converter builds them.
    pub(crate) fn atom(&self) -> Atom<'a> {
        let node = match self.node {
            Node::Json(node) => node,
            Node::Deduced => return self.untyped(false),
            Node::UntypedAtomic => return self.untyped(true),
        };
        match self.ref_name() {
            Some(QUANTITY) => {
                return Atom {
                    scalar: true,
                    list: None,
                    map: None,
                };
            }
            Some(RAW_EXTENSION) => return self.untyped(true),
            _ => {}
        }
        let resolved = self.resolved().unwrap_or(node);
        let preserve = self.preserves_unknown_fields();
        let this = Schema { preserve, ..*self };
        let kind = match resolved.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(Value::Array(ts)) => ts.first().and_then(Value::as_str).unwrap_or(""),
            _ => "",
        };
        let scalar = Atom {
            scalar: true,
            list: None,
            map: None,
        };
        match kind {
            "" => Atom {
                scalar: true,
                list: Some(this.list_atom(resolved)),
                map: Some(this.map_atom(resolved)),
            },
            "object" => Atom {
                scalar: false,
                list: None,
                map: Some(this.map_atom(resolved)),
            },
            "array" => Atom {
                scalar: false,
                list: Some(this.list_atom(resolved)),
                map: None,
            },
            _ => scalar,
        }
    }

    fn untyped(&self, atomic: bool) -> Atom<'a> {
        let make = |node| Schema {
            defs: self.defs,
            node,
            preserve: true,
        };
        Atom {
            scalar: true,
            list: Some((ListType::Atomic, make(Node::UntypedAtomic))),
            map: Some(MapAtom {
                atomic,
                owner: make(Node::UntypedAtomic),
                element: Some(make(if atomic {
                    Node::UntypedAtomic
                } else {
                    Node::Deduced
                })),
            }),
        }
    }

    fn map_atom(&self, resolved: &'a Value) -> MapAtom<'a> {
        let has_properties = resolved
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty());
        let deduced = Schema {
            defs: self.defs,
            node: Node::Deduced,
            preserve: true,
        };
        let element = match resolved.get("additionalProperties") {
            None if self.preserve || !has_properties => Some(deduced),
            None | Some(Value::Bool(false)) => None,
            Some(Value::Bool(true)) => Some(deduced),
            Some(node) => Some(self.child(node)),
        };
        let atomic = self
            .extension("x-kubernetes-map-type")
            .and_then(Value::as_str)
            == Some("atomic");
        MapAtom {
            atomic,
            owner: *self,
            element,
        }
    }

    fn list_atom(&self, resolved: &'a Value) -> (ListType, Schema<'a>) {
        let element = match resolved.get("items") {
            Some(items) if items.is_object() => self.child(items),
            _ => Schema {
                defs: self.defs,
                node: Node::UntypedAtomic,
                preserve: true,
            },
        };
        (self.list_relationship(), element)
    }

    fn list_relationship(&self) -> ListType {
        if let Some(kind) = self
            .extension("x-kubernetes-list-type")
            .and_then(Value::as_str)
        {
            return match kind {
                "set" => ListType::Set,
                "map" => {
                    let keys: Vec<String> = self
                        .extension("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|ks| {
                            ks.iter()
                                .filter_map(Value::as_str)
                                .map(String::from)
                                .collect()
                        })
                        .unwrap_or_default();
                    if keys.is_empty() {
                        ListType::Set
                    } else {
                        ListType::Map(keys)
                    }
                }
                _ => ListType::Atomic,
            };
        }
        // Built-in kinds older than list-type annotations: the patch strategy decides.
        let strategies = self.patch_strategies();
        if strategies.contains(&"merge") {
            return match self.patch_merge_key() {
                Some(key) => ListType::Map(vec![key.to_string()]),
                None => ListType::Set,
            };
        }
        ListType::Atomic
    }
}
