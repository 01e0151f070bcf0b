//! The request log: who asked for what and what they got, one record per request, kept in
//! memory (`GET /_devcluster/requests`) and optionally appended to a JSON-lines file. Tests
//! compare it with RBAC rules; people read it to see what a client really does.

use std::io::Write;

use parking_lot::Mutex;
use serde::Serialize;

/// One request.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub time: String,
    pub user: String,
    pub verb: String,
    pub api_group: String,
    pub api_version: String,
    pub resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Set for requests that name no resource (`/version`, discovery, OpenAPI).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    pub code: u16,
    pub user_agent: String,
}

/// Records kept in memory (the newest `CAPACITY`) and, when set, written to a file.
#[derive(Default)]
pub struct RequestLog {
    entries: Mutex<std::collections::VecDeque<Entry>>,
    file: Mutex<Option<std::fs::File>>,
}

const CAPACITY: usize = 200_000;

impl RequestLog {
    pub fn to_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        *self.file.lock() = Some(file);
        Ok(())
    }

    pub fn record(&self, entry: Entry) {
        if let Some(file) = self.file.lock().as_mut()
            && let Ok(line) = serde_json::to_string(&entry)
        {
            let _ = writeln!(file, "{line}");
        }
        let mut entries = self.entries.lock();
        if entries.len() == CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.entries.lock().iter().cloned().collect()
    }

    pub fn clear(&self) {
        self.entries.lock().clear();
    }
}
