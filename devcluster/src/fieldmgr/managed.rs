//! `metadata.managedFields` as the API server keeps it: decoding and validating entries,
//! manager identity (name, operation, subresource, and API version for `Update`), the sorted
//! encoding, the cap on `Update` managers, and how conflicts name a manager.

use serde_json::{Map, Value, json};

use super::error::go_quote;
use super::fieldset::FieldSet;

/// `Apply` (server-side apply) or `Update` (any other write).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who owns a set: upstream keys entries by manager, operation, subresource and, for `Update`
/// only, API version (one `Apply` entry per manager and subresource, whatever the version).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagerId {
    pub manager: String,
    pub operation: Operation,
    /// Empty for `Apply`.
    pub api_version: String,
    pub subresource: String,
}

impl ManagerId {
    pub fn new(
        manager: &str,
        operation: Operation,
        api_version: &str,
        subresource: Option<&str>,
    ) -> Self {
        ManagerId {
            manager: if manager.is_empty() {
                "unknown".into()
            } else {
                manager.into()
            },
            operation,
            api_version: match operation {
                Operation::Apply => String::new(),
                Operation::Update => api_version.into(),
            },
            subresource: subresource.unwrap_or_default().into(),
        }
    }

    /// The JSON identifier upstream sorts conflicting managers by.
    pub(crate) fn identifier(&self) -> String {
        let mut out = format!(
            "{{\"manager\":{},\"operation\":\"{}\"",
            go_quote(&self.manager),
            self.operation.as_str()
        );
        if !self.api_version.is_empty() {
            out.push_str(&format!(",\"apiVersion\":{}", go_quote(&self.api_version)));
        }
        if !self.subresource.is_empty() {
            out.push_str(&format!(",\"subresource\":{}", go_quote(&self.subresource)));
        }
        out.push('}');
        out
    }

    /// How conflict messages name the manager: `"kubectl"`, `"x" with subresource "status"`,
    /// `"kube-controller-manager" using apps/v1` (upstream `printManager`).
    pub fn describe(&self) -> String {
        let mut out = go_quote(&self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(
                " with subresource {}",
                go_quote(&self.subresource)
            ));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }
}

/// One managedFields entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedEntry {
    pub id: ManagerId,
    /// The API version the fields were recorded at.
    pub api_version: String,
    pub time: Option<String>,
    pub fields: FieldSet,
}

/// The parsed `metadata.managedFields` of an object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Managed {
    entries: Vec<ManagedEntry>,
}

const MAX_UPDATE_MANAGERS: usize = 10;

impl Managed {
    /// Decodes `metadata.managedFields` of an object (absent or null is empty).
    pub fn from_object(object: &Value) -> Result<Managed, String> {
        match object.pointer("/metadata/managedFields") {
            None | Some(Value::Null) => Ok(Managed::default()),
            Some(list) => Managed::decode(list),
        }
    }

    /// Decodes a managedFields list, with upstream's validation.
    pub fn decode(list: &Value) -> Result<Managed, String> {
        let items = list.as_array().ok_or("managedFields must be a list")?;
        let mut managed = Managed::default();
        for (i, item) in items.iter().enumerate() {
            let text = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
            let operation = match text("operation") {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            if text("apiVersion").is_empty() {
                return Err("apiVersion must not be empty".into());
            }
            match text("fieldsType") {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                other => {
                    return Err(format!(
                        "invalid fieldsType {} in managed fields entry {i}",
                        go_quote(other)
                    ));
                }
            }
            let fields = match item.get("fieldsV1") {
                None | Some(Value::Null) => FieldSet::new(),
                Some(v) => FieldSet::from_value(v).map_err(|e| {
                    format!("error decoding versioned set: error decoding set: {e}")
                })?,
            };
            let subresource = item.get("subresource").and_then(Value::as_str);
            let entry = ManagedEntry {
                id: ManagerId::new(text("manager"), operation, text("apiVersion"), subresource),
                api_version: text("apiVersion").into(),
                time: item.get("time").and_then(Value::as_str).map(String::from),
                fields,
            };
            managed.put(entry);
        }
        Ok(managed)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entries(&self) -> &[ManagedEntry] {
        &self.entries
    }

    pub fn get(&self, id: &ManagerId) -> Option<&ManagedEntry> {
        self.entries.iter().find(|e| e.id == *id)
    }

    pub(crate) fn get_mut(&mut self, id: &ManagerId) -> Option<&mut ManagedEntry> {
        self.entries.iter_mut().find(|e| e.id == *id)
    }

    /// Inserts or replaces the entry with the same identity.
    pub fn put(&mut self, entry: ManagedEntry) {
        match self.get_mut(&entry.id) {
            Some(existing) => *existing = entry,
            None => self.entries.push(entry),
        }
    }

    pub fn remove(&mut self, id: &ManagerId) {
        self.entries.retain(|e| e.id != *id);
    }

    pub(crate) fn entries_mut(&mut self) -> impl Iterator<Item = &mut ManagedEntry> {
        self.entries.iter_mut()
    }

    pub(crate) fn drop_empty(&mut self) {
        self.entries.retain(|e| !e.fields.is_empty());
    }

    /// The union of every manager's fields.
    pub fn all_fields(&self) -> FieldSet {
        self.entries
            .iter()
            .fold(FieldSet::new(), |acc, e| acc.union(&e.fields))
    }

    /// Folds the oldest `Update` managers into `ancient-changes` past ten (upstream `capManagers`).
    pub(crate) fn cap_update_managers(&mut self) {
        let mut updaters: Vec<ManagerId> = self
            .entries
            .iter()
            .filter(|e| e.id.operation == Operation::Update)
            .map(|e| e.id.clone())
            .collect();
        if updaters.len() <= MAX_UPDATE_MANAGERS {
            return;
        }
        let seconds = |m: &Managed, id: &ManagerId| {
            m.get(id)
                .and_then(|e| e.time.as_deref())
                .and_then(rfc3339_seconds)
                .unwrap_or(0)
        };
        updaters.sort_by(|a, b| {
            seconds(self, a)
                .cmp(&seconds(self, b))
                .then_with(|| a.identifier().cmp(&b.identifier()))
        });
        let mut first_of_version: Vec<(String, ManagerId)> = Vec::new();
        let mut count = updaters.len();
        for id in updaters {
            if count <= MAX_UPDATE_MANAGERS {
                break;
            }
            let Some(entry) = self.get(&id).cloned() else {
                continue;
            };
            let version = entry.api_version.clone();
            let bucket = ManagerId::new("ancient-changes", Operation::Update, &version, None);
            match first_of_version.iter().find(|(v, _)| *v == version) {
                Some((_, first)) => {
                    if let (true, Some(mut moved)) =
                        (self.get(&bucket).is_none(), self.get(first).cloned())
                    {
                        self.remove(first);
                        moved.id = bucket.clone();
                        self.put(moved);
                    }
                    if let Some(b) = self.get_mut(&bucket) {
                        b.fields = entry.fields.union(&b.fields);
                        b.time = entry.time.clone();
                    }
                    self.remove(&id);
                    count -= 1;
                }
                None => first_of_version.push((version, id)),
            }
        }
    }

    /// The sorted managedFields list, or `None` when nothing is managed.
    pub fn encode(&self) -> Option<Value> {
        if self.entries.is_empty() {
            return None;
        }
        let mut entries: Vec<&ManagedEntry> = self.entries.iter().collect();
        let seconds = |e: &ManagedEntry| e.time.as_deref().and_then(rfc3339_seconds).unwrap_or(0);
        entries.sort_by(|p, q| {
            p.id.operation
                .as_str()
                .cmp(q.id.operation.as_str())
                .then_with(|| seconds(p).cmp(&seconds(q)))
                .then_with(|| p.id.manager.cmp(&q.id.manager))
                .then_with(|| p.api_version.cmp(&q.api_version))
                .then_with(|| p.id.subresource.cmp(&q.id.subresource))
        });
        let list = entries
            .into_iter()
            .map(|e| {
                let mut m = Map::new();
                m.insert("manager".into(), json!(e.id.manager));
                m.insert("operation".into(), json!(e.id.operation.as_str()));
                m.insert("apiVersion".into(), json!(e.api_version));
                if let Some(t) = &e.time {
                    m.insert("time".into(), json!(t));
                }
                m.insert("fieldsType".into(), json!("FieldsV1"));
                m.insert("fieldsV1".into(), e.fields.to_value());
                if !e.id.subresource.is_empty() {
                    m.insert("subresource".into(), json!(e.id.subresource));
                }
                Value::Object(m)
            })
            .collect();
        Some(Value::Array(list))
    }

    /// Writes the encoding into `object.metadata.managedFields` (removing it when empty).
    pub fn store(&self, object: &mut Value) {
        let Some(root) = object.as_object_mut() else {
            return;
        };
        let metadata = root
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(metadata) = metadata.as_object_mut() else {
            return;
        };
        match self.encode() {
            Some(list) => {
                metadata.insert("managedFields".into(), list);
            }
            None => {
                metadata.remove("managedFields");
            }
        }
    }
}

/// Seconds since the epoch of an RFC 3339 timestamp (`2024-05-01T10:00:00Z`, `+02:00`, fractions).
pub(crate) fn rfc3339_seconds(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let h: i64 = rest.get(1..3)?.parse().ok()?;
            let m: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (h * 3600 + m * 60)
        }
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_timestamps() {
        assert_eq!(rfc3339_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            rfc3339_seconds("2024-03-01T12:00:00.5+01:00"),
            Some(1_709_290_800)
        );
        assert_eq!(rfc3339_seconds("garbage"), None);
    }

    #[test]
    fn rejects_bad_entries() {
        let bad = |entry: Value| Managed::decode(&json!([entry])).unwrap_err();
        assert_eq!(
            bad(json!({"manager": "a", "operation": "Patch", "apiVersion": "v1"})),
            "operation must be `Apply` or `Update`"
        );
        assert_eq!(
            bad(json!({"manager": "a", "operation": "Apply"})),
            "apiVersion must not be empty"
        );
        assert_eq!(
            bad(json!({"manager": "a", "operation": "Apply", "apiVersion": "v1"})),
            "missing fieldsType in managed fields entry 0"
        );
    }

    #[test]
    fn describes_managers_like_upstream() {
        let update = ManagerId::new("kubectl", Operation::Update, "apps/v1", None);
        assert_eq!(update.describe(), "\"kubectl\" using apps/v1");
        let apply = ManagerId::new("ctl", Operation::Apply, "v1", Some("status"));
        assert_eq!(apply.describe(), "\"ctl\" with subresource \"status\"");
        assert_eq!(
            apply.identifier(),
            "{\"manager\":\"ctl\",\"operation\":\"Apply\",\"subresource\":\"status\"}"
        );
    }
}
