//! The fleet's Kubernetes objects: namespace `fleet`, one Service per pool with EndpointSlices
//! of 100 endpoints (10.POOL.SLICE.N:8080, addresses nobody dials: the sidecars are
//! simulated), and one BackendPool per Service.

pub const NAMESPACE: &str = "fleet";
pub const PER_SLICE: usize = 100;

pub fn pool_name(p: usize) -> String {
    format!("pool-{p}")
}

pub fn slice_name(p: usize, s: usize) -> String {
    format!("svc-{p}-{s}")
}

/// The namespaces, Services and pools.
pub fn base_yaml(pools: usize) -> String {
    let mut out = format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n---\n\
         apiVersion: v1\nkind: Namespace\nmetadata: {{name: rollcall-system}}\n"
    );
    for p in 0..pools {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: svc-{p}, namespace: {NAMESPACE}}}\n\
             spec: {{ports: [{{name: http, port: 80, targetPort: 8080}}]}}\n\
             ---\napiVersion: rollcall.dev/v1alpha1\nkind: BackendPool\n\
             metadata: {{name: {}, namespace: {NAMESPACE}}}\n\
             spec: {{service: {{name: svc-{p}, port: http}}, healthCheck: {{type: None}}}}\n",
            pool_name(p)
        ));
    }
    out
}

/// One EndpointSlice as JSON, with the fields Kubernetes' EndpointSlice controller fills in
/// (node names, Pod references with their uid, the Service's labels, its owner reference, the
/// trigger-time annotation), so the controller caches what it would in a cluster.
pub fn slice_json(p: usize, s: usize, ready_first: bool) -> serde_json::Value {
    let endpoints: Vec<serde_json::Value> = (0..PER_SLICE)
        .map(|i| {
            serde_json::json!({
                "addresses": [format!("10.{}.{}.{}", p % 256, s % 256, i + 1)],
                "conditions": {"ready": i != 0 || ready_first, "serving": true, "terminating": false},
                "nodeName": format!("node-{}", (s * PER_SLICE + i) % 50),
                "targetRef": {"kind": "Pod", "name": format!("pod-{p}-{s}-{i}"), "namespace": NAMESPACE,
                              "uid": format!("00000000-0000-4000-8000-{:06}{:06}", p * 1000 + s, i)},
                "zone": format!("zone-{}", i % 3),
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": slice_name(p, s), "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": format!("svc-{p}"),
                                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                                "app.kubernetes.io/name": format!("svc-{p}")},
                     "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "2026-12-03T07:00:00Z"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": format!("svc-{p}"),
                                          "uid": format!("00000000-0000-4000-8000-{p:012}"),
                                          "controller": true, "blockOwnerDeletion": true}]},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints,
    })
}
