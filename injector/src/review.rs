//! AdmissionReview in, AdmissionReview out: the envelope around `patch::decide`. A review that
//! cannot be read is answered as invalid (the API server then applies the webhook's
//! failurePolicy); every answer echoes the request's uid.

use k8s_openapi::api::core::v1::Pod;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};

use crate::config::SidecarSettings;
use crate::patch::{self, Decision};

/// What became of one review, for metrics and logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Injected,
    Skipped,
    Refused,
    Invalid,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Self::Injected => "injected",
            Self::Skipped => "skipped",
            Self::Refused => "refused",
            Self::Invalid => "invalid",
        }
    }
}

/// The review as the API server's documentation shows it: `response.patch` as a base64
/// string (kube-core serializes the bytes as a JSON array of numbers, which Go also decodes,
/// but nothing else in Kubernetes writes).
pub fn encode(review: &AdmissionReview<kube::core::DynamicObject>) -> serde_json::Result<Vec<u8>> {
    use base64::Engine as _;
    let mut value = serde_json::to_value(review)?;
    if let Some(patch) = value.pointer_mut("/response/patch")
        && let Some(bytes) = patch.as_array()
    {
        let bytes: Vec<u8> = bytes
            .iter()
            .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect();
        *patch = serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(bytes));
    }
    serde_json::to_vec(&value)
}

/// Answer the AdmissionReview in `body`.
pub fn answer(
    body: &[u8],
    settings: &SidecarSettings,
) -> (Outcome, AdmissionReview<kube::core::DynamicObject>) {
    let review: AdmissionReview<Pod> = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(e) => {
            return (
                Outcome::Invalid,
                AdmissionResponse::invalid(format!("not an AdmissionReview: {e}")).into_review(),
            );
        }
    };
    let request: AdmissionRequest<Pod> = match review.try_into() {
        Ok(request) => request,
        Err(e) => {
            return (
                Outcome::Invalid,
                AdmissionResponse::invalid(format!("not an AdmissionReview request: {e}"))
                    .into_review(),
            );
        }
    };
    let response = AdmissionResponse::from(&request);
    let Some(pod) = &request.object else {
        return (Outcome::Skipped, response.into_review());
    };
    let namespace = request.namespace.clone().unwrap_or_default();
    let name = pod
        .metadata
        .name
        .clone()
        .or_else(|| pod.metadata.generate_name.clone().map(|g| format!("{g}*")))
        .unwrap_or_default();
    match patch::decide(pod, &namespace, settings) {
        Decision::Skip(reason) => {
            tracing::debug!(%namespace, pod = %name, %reason, "not injected");
            (Outcome::Skipped, response.into_review())
        }
        Decision::Refuse(message) => {
            tracing::info!(%namespace, pod = %name, %message, "refused");
            (Outcome::Refused, response.deny(message).into_review())
        }
        Decision::Inject { pools, patch } => {
            let operations: Result<json_patch::Patch, _> =
                serde_json::from_value(serde_json::Value::Array(patch));
            match operations
                .map_err(|e| e.to_string())
                .and_then(|p| response.clone().with_patch(p).map_err(|e| e.to_string()))
            {
                Ok(patched) => {
                    let pools: Vec<String> = pools.iter().map(ToString::to_string).collect();
                    tracing::info!(%namespace, pod = %name, pools = %pools.join(","), "injected the sidecar");
                    (Outcome::Injected, patched.into_review())
                }
                Err(e) => {
                    tracing::error!(%namespace, pod = %name, error = %e, "cannot encode the patch");
                    (
                        Outcome::Invalid,
                        AdmissionResponse::invalid(e).into_review(),
                    )
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_travels_as_base64_and_the_uid_is_echoed() {
        let pod = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/one-pool.pod.json"
        ))
        .unwrap();
        let settings = SidecarSettings::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/settings.json"
        )))
        .unwrap();
        let body = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u-1",
            "kind":{{"group":"","version":"v1","kind":"Pod"}},"resource":{{"group":"","version":"v1","resource":"pods"}},
            "namespace":"shop","operation":"CREATE","userInfo":{{}},"object":{pod}}}}}"#
        );
        let (outcome, review) = answer(body.as_bytes(), &settings);
        assert_eq!(outcome, Outcome::Injected);
        let json: serde_json::Value = serde_json::from_slice(&encode(&review).unwrap()).unwrap();
        assert_eq!(json["response"]["uid"], "u-1");
        assert_eq!(json["response"]["patchType"], "JSONPatch");
        assert!(json["response"]["patch"].is_string());
    }

    #[test]
    fn garbage_is_answered_as_invalid() {
        let settings = SidecarSettings::load(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/settings.json"
        )))
        .unwrap();
        let (outcome, review) = answer(b"nope", &settings);
        assert_eq!(outcome, Outcome::Invalid);
        assert!(!review.response.unwrap().allowed);
    }
}
