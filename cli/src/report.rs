//! The outcome of a check run: checks grouped by category, printed as `linkerd check` prints
//! them (√ passed, ‼ warning, × failed, - skipped, with the detail and a hint underneath) or
//! as JSON for scripts.

use serde::Serialize;

/// How one check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Success,
    Warning,
    Error,
    Skipped,
}

/// One check.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    #[serde(skip)]
    pub category: &'static str,
    pub description: String,
    pub result: Outcome,
    /// What was found (why it failed, or the facts behind a pass).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What to do about a failure or a warning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Every check of a run, in order.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub checks: Vec<Check>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Category<'a> {
    category_name: &'a str,
    checks: Vec<&'a Check>,
}

// === impl Check ===

impl Check {
    pub fn new(category: &'static str, description: impl Into<String>, result: Outcome) -> Self {
        Self {
            category,
            description: description.into(),
            result,
            detail: None,
            hint: None,
        }
    }

    pub fn ok(category: &'static str, description: impl Into<String>) -> Self {
        Self::new(category, description, Outcome::Success)
    }

    pub fn fail(
        category: &'static str,
        description: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(category, description, Outcome::Error).detail(detail)
    }

    pub fn warn(
        category: &'static str,
        description: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(category, description, Outcome::Warning).detail(detail)
    }

    pub fn skip(
        category: &'static str,
        description: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(category, description, Outcome::Skipped).detail(detail)
    }

    #[must_use]
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

// === impl Report ===

impl Report {
    pub fn push(&mut self, check: Check) {
        self.checks.push(check);
    }

    pub fn failed(&self) -> usize {
        self.count(Outcome::Error)
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.checks.iter().filter(|c| c.result == outcome).count()
    }

    fn categories(&self) -> Vec<Category<'_>> {
        let mut out: Vec<Category<'_>> = Vec::new();
        for check in &self.checks {
            match out.last_mut() {
                Some(last) if last.category_name == check.category => last.checks.push(check),
                _ => out.push(Category {
                    category_name: check.category,
                    checks: vec![check],
                }),
            }
        }
        out
    }

    /// Plain text, one line per check, grouped under underlined category names.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for category in self.categories() {
            out.push_str(category.category_name);
            out.push('\n');
            out.push_str(&"-".repeat(category.category_name.chars().count()));
            out.push('\n');
            for check in category.checks {
                let mark = match check.result {
                    Outcome::Success => "√",
                    Outcome::Warning => "‼",
                    Outcome::Error => "×",
                    Outcome::Skipped => "-",
                };
                out.push_str(&format!("{mark} {}\n", check.description));
                if let Some(detail) = &check.detail {
                    for line in detail.lines() {
                        out.push_str(&format!("    {line}\n"));
                    }
                }
                if let Some(hint) = &check.hint {
                    out.push_str(&format!("    hint: {hint}\n"));
                }
            }
            out.push('\n');
        }
        let (failed, warned) = (self.failed(), self.count(Outcome::Warning));
        if failed == 0 {
            out.push_str("Status check results are √");
            if warned > 0 {
                out.push_str(&format!(
                    " ({warned} warning{})",
                    if warned == 1 { "" } else { "s" }
                ));
            }
        } else {
            out.push_str(&format!(
                "Status check results are × ({failed} failed, {warned} warning{})",
                if warned == 1 { "" } else { "s" }
            ));
        }
        out.push('\n');
        out
    }

    /// `{"success": bool, "categories": [{"categoryName", "checks": [...]}]}`.
    pub fn json(&self) -> String {
        let doc = serde_json::json!({
            "success": self.failed() == 0,
            "categories": self.categories(),
        });
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_groups_by_category_and_names_failures() {
        let mut report = Report::default();
        report.push(Check::ok("kubernetes-api", "can reach the API server"));
        report.push(
            Check::fail(
                "rollcall-controller",
                "a controller leads",
                "the Lease expired 20s ago",
            )
            .hint("kubectl -n rollcall-system get pods"),
        );
        report.push(Check::warn(
            "rollcall-controller",
            "replicas",
            "1 of 2 ready",
        ));
        let text = report.text();
        assert!(text.starts_with("kubernetes-api\n--------------\n√ can reach the API server\n"));
        assert!(
            text.contains("× a controller leads\n    the Lease expired 20s ago\n    hint: kubectl")
        );
        assert!(text.ends_with("Status check results are × (1 failed, 1 warning)\n"));
        let json: serde_json::Value = serde_json::from_str(&report.json()).unwrap();
        assert_eq!(json["success"], false);
        assert_eq!(json["categories"][1]["checks"][0]["result"], "error");
        assert_eq!(json["categories"][1]["categoryName"], "rollcall-controller");
    }
}
