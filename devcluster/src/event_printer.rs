//! The built-in printer of Events (`printEvent` in `pkg/printers/internalversion`), which the
//! API server runs wide for `kubectl get events`: Last Seen (the series' last observation,
//! else the last, else the first timestamp or the event time), Type, Reason, Object,
//! Subobject, Source, Message, First Seen, Count and Name. Both Event APIs print the same
//! table, from the core form.

use std::borrow::Cow;

use serde_json::{Value, json};

use crate::catalog::{CellSource, Column};
use crate::convert::event_as_core;
use crate::table::human_age;

fn column(name: &str, priority: i64, format: &str, cell: fn(&Value) -> Value) -> Column {
    Column {
        name: name.into(),
        type_: "string".into(),
        format: format.into(),
        description: String::new(),
        priority,
        source: CellSource::Builtin(cell),
    }
}

/// The ten columns, in upstream's order.
pub fn columns() -> Vec<Column> {
    vec![
        column("Last Seen", 0, "", last_seen),
        column("Type", 0, "", |e| text(e, "/type")),
        column("Reason", 0, "", |e| text(e, "/reason")),
        column("Object", 0, "", object),
        column("Subobject", 1, "", |e| text(e, "/involvedObject/fieldPath")),
        column("Source", 1, "", source),
        column("Message", 0, "", |e| {
            json!(str_at(&core(e), "/message").trim())
        }),
        column("First Seen", 1, "", |e| json!(first_seen(&core(e)))),
        column("Count", 1, "", count),
        column("Name", 1, "name", |e| text(e, "/metadata/name")),
    ]
}

fn core(event: &Value) -> Cow<'_, Value> {
    event_as_core(event)
}

fn str_at<'a>(event: &'a Value, pointer: &str) -> &'a str {
    event.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn text(event: &Value, pointer: &str) -> Value {
    json!(str_at(&core(event), pointer))
}

/// `translateTimestampSince`: an age, or `<unknown>` for a zero time.
fn since(time: &str) -> String {
    if time.is_empty() {
        "<unknown>".into()
    } else {
        human_age(time)
    }
}

fn first_seen(event: &Value) -> String {
    match str_at(event, "/firstTimestamp") {
        "" => since(str_at(event, "/eventTime")),
        first => since(first),
    }
}

fn last_seen(event: &Value) -> Value {
    let event = core(event);
    if event.get("series").is_some_and(Value::is_object) {
        return json!(since(str_at(&event, "/series/lastObservedTime")));
    }
    json!(match str_at(&event, "/lastTimestamp") {
        "" => first_seen(&event),
        last => since(last),
    })
}

fn object(event: &Value) -> Value {
    let event = core(event);
    let kind = str_at(&event, "/involvedObject/kind").to_lowercase();
    json!(match str_at(&event, "/involvedObject/name") {
        "" => kind,
        name => format!("{kind}/{name}"),
    })
}

/// `formatEventSource`: component (else the reporting controller), then host (else the
/// reporting instance) after a comma when there is one.
fn source(event: &Value) -> Value {
    let event = core(event);
    let first = |a: &str, b: &str| {
        let a = str_at(&event, a);
        if a.is_empty() {
            str_at(&event, b).to_string()
        } else {
            a.to_string()
        }
    };
    let component = first("/source/component", "/reportingComponent");
    let instance = first("/source/host", "/reportingInstance");
    json!(if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    })
}

fn count(event: &Value) -> Value {
    let event = core(event);
    if event.get("series").is_some_and(Value::is_object) {
        return json!(
            event
                .pointer("/series/count")
                .and_then(Value::as_i64)
                .unwrap_or(0)
        );
    }
    match event.get("count").and_then(Value::as_i64) {
        None | Some(0) => json!(1),
        Some(n) => json!(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_decides_last_seen_and_count() {
        let event = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "regarding": {"kind": "BackendPool", "name": "web"}, "note": " ejected ",
            "reportingController": "rollcall", "reportingInstance": "rollcall-0",
            "eventTime": "2020-01-01T00:00:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2020-01-01T00:00:05.000000Z"}});
        let cells: Vec<Value> = columns()
            .iter()
            .map(|c| match &c.source {
                CellSource::Builtin(f) => f(&event),
                CellSource::Path(_) => Value::Null,
            })
            .collect();
        assert_eq!(cells[3], "backendpool/web");
        assert_eq!(cells[5], "rollcall, rollcall-0");
        assert_eq!(cells[6], "ejected");
        assert_eq!(cells[8], 3);
    }
}
