//! Just enough of the Prometheus text format to read a few series from `/metrics`.

use std::collections::BTreeMap;

/// One sample: name, labels, value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parse the text exposition format; lines that do not parse are skipped.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(sample)
        .collect()
}

fn sample(line: &str) -> Option<Sample> {
    let (series, value) = line.trim().rsplit_once(' ')?;
    let value = value.parse().ok()?;
    let (name, labels) = match series.split_once('{') {
        None => (series.to_string(), BTreeMap::new()),
        Some((name, rest)) => (name.to_string(), labels(rest.strip_suffix('}')?)?),
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

fn labels(text: &str) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => {
                    let (_, escaped) = chars.next()?;
                    value.push(if escaped == 'n' { '\n' } else { escaped });
                }
                '"' => break i,
                c => value.push(c),
            }
        };
        out.insert(key.trim_start_matches(',').trim().to_string(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Some(out)
}

/// The sum of `name`'s samples whose labels include every pair of `matching`.
pub fn sum(samples: &[Sample], name: &str, matching: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<f64> = samples
        .iter()
        .filter(|s| {
            s.name == name
                && matching
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
        .collect();
    (!found.is_empty()).then(|| found.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_labels_and_values() {
        let text = "# HELP x y\nrollcall_controller_connected 1\nrollcall_roster_updates_total{result=\"refused\"} 2\nrollcall_endpoint_state{pool=\"shop/web\",endpoint=\"1.2.3.4:80\",state=\"Ejected\"} 0\n";
        let samples = parse(text);
        assert_eq!(samples.len(), 3);
        assert_eq!(
            sum(
                &samples,
                "rollcall_roster_updates_total",
                &[("result", "refused")]
            ),
            Some(2.0)
        );
        assert_eq!(samples[2].labels["endpoint"], "1.2.3.4:80");
        assert_eq!(sum(&samples, "nope", &[]), None);
    }
}
