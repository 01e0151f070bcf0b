//! Field paths rendered exactly as `k8s.io/apimachinery/pkg/util/validation/field.Path`:
//! `spec.ports[0].name`, `spec.selector[app]`, and `<nil>` for the empty (nil) path.

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Element {
    Child(String),
    Index(usize),
    Key(String),
}

/// A path from the object's root; empty means Go's nil `*field.Path`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldPath {
    elements: Vec<Element>,
}

impl FieldPath {
    /// Go's `nil` path, printed `<nil>`.
    pub fn root() -> Self {
        Self::default()
    }

    pub fn child(&self, name: &str) -> Self {
        self.with(Element::Child(name.to_string()))
    }

    pub fn index(&self, index: usize) -> Self {
        self.with(Element::Index(index))
    }

    pub fn key(&self, key: &str) -> Self {
        self.with(Element::Key(key.to_string()))
    }

    pub fn is_root(&self) -> bool {
        self.elements.is_empty()
    }

    fn with(&self, element: Element) -> Self {
        let mut elements = self.elements.clone();
        elements.push(element);
        Self { elements }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.elements.is_empty() {
            return f.write_str("<nil>");
        }
        for (position, element) in self.elements.iter().enumerate() {
            match element {
                Element::Child(name) if !name.is_empty() => {
                    if position > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(name)?;
                }
                // Go prints an empty child name like a subscript of its (empty) index.
                Element::Child(_) => f.write_str("[]")?,
                Element::Index(index) => write!(f, "[{index}]")?,
                Element::Key(key) => write!(f, "[{key}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::FieldPath;

    #[test]
    fn renders_like_field_path() {
        let spec = FieldPath::root().child("spec");
        assert_eq!(FieldPath::root().to_string(), "<nil>");
        assert_eq!(
            spec.child("ports").index(0).child("name").to_string(),
            "spec.ports[0].name"
        );
        assert_eq!(
            spec.child("selector").key("app").to_string(),
            "spec.selector[app]"
        );
        assert_eq!(FieldPath::root().key("k").child("a").to_string(), "[k].a");
    }
}
