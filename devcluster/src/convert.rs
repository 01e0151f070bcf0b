//! Versions and views of one stored object. Objects are kept in one form per storage; each
//! API that shows them converts on the way out and back on the way in: custom resources
//! between their CRD's versions (conversion strategy `None`: only `apiVersion` changes), and
//! Events between core `v1` (the stored form) and `events.k8s.io/v1`, field by field as the
//! API server's own conversion maps them.

use serde_json::{Map, Value};

use crate::catalog::ResourceType;

/// core/v1 Event field ↔ events.k8s.io/v1 Event field.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn rename(
    object: &mut Map<String, Value>,
    pairs: impl Iterator<Item = (&'static str, &'static str)>,
) {
    let moves: Vec<(&str, &str)> = pairs.collect();
    let taken: Vec<(&str, Option<Value>)> = moves
        .iter()
        .map(|(from, to)| (*to, object.remove(*from)))
        .collect();
    for (to, value) in taken {
        if let Some(value) = value {
            object.insert(to.to_string(), value);
        }
    }
}

fn is_event_view(t: &ResourceType) -> bool {
    t.group == "events.k8s.io" && t.kind == "Event"
}

/// The stored object as `t` shows it.
pub fn to_view(t: &ResourceType, stored: &Value) -> Value {
    let mut viewed = stored.clone();
    if let Some(obj) = viewed.as_object_mut() {
        if is_event_view(t) {
            rename(obj, EVENT_FIELDS.iter().copied());
            // Zero-valued legacy fields are dropped by the conversion.
            if obj.get("deprecatedCount") == Some(&Value::from(0)) {
                obj.remove("deprecatedCount");
            }
        }
        obj.insert("apiVersion".into(), Value::String(t.api_version()));
        obj.insert("kind".into(), Value::String(t.kind.clone()));
    }
    viewed
}

/// An object written through `t`, in its stored form.
pub fn to_storage(t: &ResourceType, viewed: Value) -> Value {
    let mut stored = viewed;
    if let Some(obj) = stored.as_object_mut() {
        if is_event_view(t) {
            rename(obj, EVENT_FIELDS.iter().map(|(core, new)| (*new, *core)));
        }
        let version = if t.kind == "Event" && t.group.starts_with("events") {
            "v1".to_string()
        } else if t.group.is_empty() {
            t.storage_version.clone()
        } else {
            format!("{}/{}", t.group, t.storage_version)
        };
        obj.insert("apiVersion".into(), Value::String(version));
        obj.insert("kind".into(), Value::String(t.kind.clone()));
    }
    stored
}

/// An Event in its core `v1` form, whichever of the two APIs `event` is shown through.
pub fn event_as_core(event: &Value) -> std::borrow::Cow<'_, Value> {
    let newer = event
        .get("apiVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| v.starts_with("events.k8s.io/"));
    if !newer {
        return std::borrow::Cow::Borrowed(event);
    }
    let mut core = event.clone();
    if let Some(obj) = core.as_object_mut() {
        rename(obj, EVENT_FIELDS.iter().map(|(core, new)| (*new, *core)));
    }
    std::borrow::Cow::Owned(core)
}

/// A field selector term as the stored form names it.
pub fn stored_field(t: &ResourceType, field: &str) -> String {
    if t.kind == "Event" {
        for (core, new) in EVENT_FIELDS {
            if let Some(rest) = field.strip_prefix(new)
                && (rest.is_empty() || rest.starts_with('.'))
            {
                return format!("{core}{rest}");
            }
        }
    }
    field.to_string()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::Catalog;

    #[test]
    fn events_round_trip_between_their_two_apis() {
        let catalog = Catalog::builtin();
        let new = catalog.get("events.k8s.io", "v1", "events").unwrap();
        let core = catalog.get("", "v1", "events").unwrap();
        let written = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.1", "namespace": "shop"},
            "regarding": {"kind": "BackendPool", "name": "web", "uid": "u1"},
            "note": "10.0.0.1:80 ejected by 2 of 2 sidecars", "reason": "EndpointEjected",
            "type": "Warning", "reportingController": "rollcall-controller",
            "reportingInstance": "rollcall-0", "action": "Eject",
            "eventTime": "2026-12-01T00:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-12-01T00:00:01.000000Z"},
        });
        let stored = to_storage(&new, written.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "web");
        assert_eq!(stored["message"], written["note"]);
        assert_eq!(stored["reportingComponent"], "rollcall-controller");
        let as_core = to_view(&core, &stored);
        assert_eq!(as_core["involvedObject"]["kind"], "BackendPool");
        assert_eq!(to_view(&new, &stored), written);
        assert_eq!(stored_field(&new, "regarding.name"), "involvedObject.name");
        assert_eq!(
            stored_field(&core, "involvedObject.name"),
            "involvedObject.name"
        );
    }
}
