//! The sidecar's standalone configuration: a YAML file of pools, each with a listen address, a
//! static roster of endpoints and a `PoolPolicy` (the same fields as the `BackendPool` spec).
//! Loading parses and validates the whole file; a bad file is refused with every problem named by
//! its path (`pools[1] (checkout).policy.healthCheck.timeout: ...`) and never half-applied.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::Path;

use rollcall_api::policy::PoolPolicy;
use serde::{Deserialize, Serialize};

pub mod watch;

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SidecarConfig {
    #[serde(default)]
    pub pools: Vec<PoolConfig>,
}

/// One pool: where the application sends, who serves it, and how.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolConfig {
    pub name: String,
    /// Address the application sends to, e.g. `127.0.0.1:15001`.
    pub listen: SocketAddr,
    /// `endpoints:` left empty (YAML null) is an empty roster, as it always was: a pool can be
    /// declared before its endpoints are known.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub endpoints: Vec<EndpointConfig>,
    #[serde(default)]
    pub policy: PoolPolicy,
}

fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// One endpoint of a pool's roster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EndpointConfig {
    /// `ip:port`; Kubernetes endpoints are addresses, so names are not resolved.
    pub address: SocketAddr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// Leaving (EndpointSlice `terminating`): no new requests unless nothing else can serve.
    #[serde(default)]
    pub terminating: bool,
}

fn default_weight() -> u32 {
    1
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid sidecar config: {message}")]
    Parse { path: String, message: String },
    #[error("{path} is refused: {}", problems.join("; "))]
    Invalid { path: String, problems: Vec<String> },
}

impl SidecarConfig {
    /// Read, parse and validate a file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_bytes(path).map(|(config, _)| config)
    }

    /// Like `load`, also returning the bytes the config was parsed from.
    pub fn load_bytes(path: &Path) -> Result<(Self, Vec<u8>), ConfigError> {
        let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let config = Self::parse(
            &String::from_utf8_lossy(&bytes),
            &path.display().to_string(),
        )?;
        Ok((config, bytes))
    }

    /// Parse and validate text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let mut config: Self = serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
            path: origin.into(),
            message: e.to_string(),
        })?;
        // The running config is kept: without this, each pool's list keeps the spare capacity
        // its growth left, up to as much again as the endpoints themselves.
        for pool in &mut config.pools {
            pool.endpoints.shrink_to_fit();
        }
        let problems = config.problems();
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError::Invalid {
                path: origin.into(),
                problems,
            })
        }
    }

    /// Every rule the parser cannot check, each problem with its path.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut names = HashSet::new();
        let mut listens = HashSet::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let at = format!("pools[{i}] ({})", pool.name);
            if pool.name.is_empty() {
                problems.push(format!("pools[{i}].name: must not be empty"));
            } else if !names.insert(pool.name.as_str()) {
                problems.push(format!("{at}.name: another pool already has this name"));
            }
            if !listens.insert(pool.listen) {
                problems.push(format!(
                    "{at}.listen: {} is already the listen address of another pool",
                    pool.listen
                ));
            }
            let mut addresses = HashSet::new();
            for (j, ep) in pool.endpoints.iter().enumerate() {
                if !addresses.insert(ep.address) {
                    problems.push(format!(
                        "{at}.endpoints[{j}].address: {} is listed twice",
                        ep.address
                    ));
                }
                if ep.weight == 0 || ep.weight > 10_000 {
                    problems.push(format!(
                        "{at}.endpoints[{j}].weight: must be 1-10000, got {}",
                        ep.weight
                    ));
                }
                if ep.address.port() == 0 {
                    problems.push(format!("{at}.endpoints[{j}].address: port 0 is not a port"));
                }
            }
            if let Err(errors) = pool.policy.validate() {
                problems.extend(errors.iter().map(|e| format!("{at}.policy.{e}")));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_pool_takes_policy_defaults() {
        let cfg = SidecarConfig::parse(
            "pools:\n- name: web\n  listen: 127.0.0.1:15001\n  endpoints:\n  - address: 127.0.0.1:8080\n",
            "test",
        )
        .unwrap();
        assert_eq!(cfg.pools[0].policy, PoolPolicy::default());
        assert_eq!(cfg.pools[0].endpoints[0].weight, 1);
        assert!(!cfg.pools[0].endpoints[0].terminating);
    }

    #[test]
    fn an_empty_endpoints_key_is_an_empty_roster() {
        for text in [
            "pools:\n- name: web\n  listen: 127.0.0.1:15001\n  endpoints:\n",
            "pools:\n- name: web\n  listen: 127.0.0.1:15001\n  endpoints: []\n",
            "pools:\n- name: web\n  listen: 127.0.0.1:15001\n",
        ] {
            let cfg = SidecarConfig::parse(text, "test").unwrap();
            assert!(cfg.pools[0].endpoints.is_empty(), "{text}");
        }
    }

    #[test]
    fn every_problem_is_named_by_its_path() {
        let text = r#"
pools:
- name: web
  listen: 127.0.0.1:15001
  endpoints:
  - {address: "127.0.0.1:8080", weight: 0}
  - {address: "127.0.0.1:8080"}
  policy: {healthCheck: {interval: 1s, timeout: 5s}}
- name: web
  listen: 127.0.0.1:15001
"#;
        let err = SidecarConfig::parse(text, "sidecar.yaml").unwrap_err();
        let ConfigError::Invalid { problems, .. } = &err else {
            panic!("expected Invalid, got {err}");
        };
        assert_eq!(
            problems,
            &[
                "pools[0] (web).endpoints[0].weight: must be 1-10000, got 0",
                "pools[0] (web).endpoints[1].address: 127.0.0.1:8080 is listed twice",
                "pools[0] (web).policy.healthCheck.timeout: must be more than 0s and at most the interval (1s), got 5s",
                "pools[1] (web).name: another pool already has this name",
                "pools[1] (web).listen: 127.0.0.1:15001 is already the listen address of another pool",
            ]
        );
        assert!(err.to_string().starts_with("sidecar.yaml is refused: "));
    }

    #[test]
    fn unknown_fields_and_bad_addresses_are_parse_errors() {
        let err = SidecarConfig::parse("pools:\n- name: a\n  listn: 1.2.3.4:5\n", "f").unwrap_err();
        assert!(err.to_string().contains("listn"), "{err}");
        let err = SidecarConfig::parse(
            "pools:\n- name: a\n  listen: 127.0.0.1:1\n  endpoints: [{address: backend:80}]\n",
            "f",
        )
        .unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
    }

    #[test]
    fn missing_file_says_which() {
        let err = SidecarConfig::load(Path::new("/nonexistent/rollcall.yaml")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/rollcall.yaml"));
    }
}
