//! What the API server and the core controllers do around particular kinds, kept to what
//! clients of this fixture notice: Namespaces (must exist and not be terminating, get their
//! `default` ServiceAccount, empty out when deleted), Services (a cluster IP, port defaults,
//! an immutable `clusterIP`), Pods and Deployments (the defaults `kubectl get` shows), and
//! CRDs (validated, established, and serving their custom resources at once; deleting one
//! deletes its objects).

use serde_json::{Value, json};

use crate::catalog::ResourceType;
use crate::cluster::{Cluster, Db};
use crate::crd;
use crate::meta;
use crate::status::{ApiError, ApiResult};
use crate::store::Key;

fn namespace_key(name: &str) -> Key {
    Key {
        storage: "namespaces".into(),
        namespace: String::new(),
        name: name.into(),
    }
}

/// Creating in a namespace needs the namespace, and one that is not terminating (the
/// NamespaceLifecycle admission plugin; its refusal is `admission.NewForbidden` of the object).
pub fn check_namespace(db: &Db, t: &ResourceType, name: &str, namespace: &str) -> ApiResult<()> {
    let ns = db
        .store
        .get(&namespace_key(namespace))
        .ok_or_else(|| ApiError::not_found("", "namespaces", namespace))?;
    if meta::is_deleting(&ns) {
        let mut details = json!({"name": name, "kind": t.resource,
            "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                        "message": format!("namespace {namespace} is being terminated")}]});
        if !t.group.is_empty() {
            details["group"] = json!(t.group);
        }
        return Err(ApiError::forbidden(format!(
            "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} \
             because it is being terminated",
            t.qualified()
        ))
        .with_details(details));
    }
    Ok(())
}

fn default_str(object: &mut Value, pointer: &str, value: &str) {
    if object.pointer(pointer).is_none_or(Value::is_null) {
        set(object, pointer, json!(value));
    }
}

fn set(object: &mut Value, pointer: &str, value: Value) {
    let mut node = object;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if !node.is_object() {
            *node = json!({});
        }
        let Some(map) = node.as_object_mut() else {
            return;
        };
        if i == parts.len() - 1 {
            map.insert(part.to_string(), value);
            return;
        }
        node = map.entry(part.to_string()).or_insert_with(|| json!({}));
    }
}

/// The next free address in 10.96.0.0/16.
fn allocate_cluster_ip(db: &Db) -> String {
    let used: Vec<String> = db
        .store
        .list("services", None, None)
        .unwrap_or_default()
        .iter()
        .filter_map(|s| {
            s.pointer("/spec/clusterIP")
                .and_then(Value::as_str)
                .map(String::from)
        })
        .collect();
    (10u32..65_000)
        .map(|n| format!("10.96.{}.{}", n / 256, n % 256))
        .find(|ip| !used.contains(ip))
        .unwrap_or_else(|| "10.96.255.254".into())
}

/// A Service's defaults (what decoding fills in).
fn service_defaults(svc: &mut Value) {
    default_str(svc, "/spec/type", "ClusterIP");
    default_str(svc, "/spec/sessionAffinity", "None");
    if svc.pointer("/spec/type").and_then(Value::as_str) != Some("ExternalName") {
        default_str(svc, "/spec/internalTrafficPolicy", "Cluster");
    }
    if let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut() {
            if port.get("protocol").is_none() {
                port["protocol"] = json!("TCP");
            }
            if port.get("targetPort").is_none() {
                port["targetPort"] = port.get("port").cloned().unwrap_or(json!(0));
            }
        }
    }
}

/// What the Service registry allocates: a cluster IP and its family, kept across updates.
fn service_addresses(db: &Db, svc: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    if svc.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return Ok(());
    }
    if let Some(old) = old {
        let old_ip = old.pointer("/spec/clusterIP").cloned();
        let new_ip = svc.pointer("/spec/clusterIP").cloned();
        if let (Some(o), Some(n)) = (&old_ip, &new_ip)
            && o != n
            && n != &json!("")
        {
            let name = meta::name(svc).unwrap_or("").to_string();
            return Err(ApiError::invalid(
                "Service",
                "",
                &name,
                format!(
                    "Service \"{name}\" is invalid: spec.clusterIPs[0]: Invalid value: {n}: may not change once set"
                ),
                json!([{"reason": "FieldValueInvalid", "field": "spec.clusterIPs[0]"}]),
            ));
        }
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            let pointer = format!("/spec/{field}");
            let unset = svc
                .pointer(&pointer)
                .is_none_or(|v| v.is_null() || v == &json!(""));
            if unset && let Some(kept) = old.pointer(&pointer).cloned() {
                set(svc, &pointer, kept);
            }
        }
    }
    if svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let ip = allocate_cluster_ip(db);
        set(svc, "/spec/clusterIP", json!(ip));
    }
    if svc.pointer("/spec/clusterIPs").is_none() {
        let ip = svc["spec"]["clusterIP"].clone();
        set(svc, "/spec/clusterIPs", json!([ip]));
    }
    if svc.pointer("/spec/ipFamilies").is_none() {
        set(svc, "/spec/ipFamilies", json!(["IPv4"]));
    }
    default_str(svc, "/spec/ipFamilyPolicy", "SingleStack");
    Ok(())
}

fn pod_defaults(pod: &mut Value) {
    default_str(pod, "/spec/restartPolicy", "Always");
    default_str(pod, "/spec/dnsPolicy", "ClusterFirst");
    default_str(pod, "/spec/schedulerName", "default-scheduler");
    default_str(pod, "/spec/serviceAccountName", "default");
    if pod.pointer("/spec/terminationGracePeriodSeconds").is_none() {
        set(pod, "/spec/terminationGracePeriodSeconds", json!(30));
    }
    if let Some(containers) = pod
        .pointer_mut("/spec/containers")
        .and_then(Value::as_array_mut)
    {
        for c in containers.iter_mut() {
            if c.get("terminationMessagePath").is_none() {
                c["terminationMessagePath"] = json!("/dev/termination-log");
                c["terminationMessagePolicy"] = json!("File");
            }
            if c.get("imagePullPolicy").is_none() {
                let latest = c["image"]
                    .as_str()
                    .is_none_or(|i| !i.contains(':') || i.ends_with(":latest"));
                c["imagePullPolicy"] = json!(if latest { "Always" } else { "IfNotPresent" });
            }
        }
    }
}

fn deployment_defaults(deploy: &mut Value) {
    if deploy.pointer("/spec/replicas").is_none() {
        set(deploy, "/spec/replicas", json!(1));
    }
    if deploy.pointer("/spec/strategy").is_none() {
        set(
            deploy,
            "/spec/strategy",
            json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
        );
    }
    if deploy.pointer("/spec/revisionHistoryLimit").is_none() {
        set(deploy, "/spec/revisionHistoryLimit", json!(10));
    }
    if deploy.pointer("/spec/progressDeadlineSeconds").is_none() {
        set(deploy, "/spec/progressDeadlineSeconds", json!(600));
    }
}

/// The defaults built-in kinds get on every write, before field ownership is recorded (the
/// API server defaults while decoding, so an update or apply that drops a defaulted field gets
/// it back).
pub fn defaults(t: &ResourceType, object: &mut Value) {
    match (t.group.as_str(), t.kind.as_str()) {
        ("", "Namespace") => {
            let name = meta::name(object).unwrap_or("").to_string();
            if let Some(meta) = meta::metadata_mut(object) {
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if let Some(labels) = labels.as_object_mut() {
                    labels.insert("kubernetes.io/metadata.name".into(), json!(name));
                }
            }
        }
        ("", "Service") => service_defaults(object),
        ("", "Pod") => pod_defaults(object),
        ("apps", "Deployment") => deployment_defaults(object),
        _ => {}
    }
}

/// What the registry does to a new object after admission (allocations, initial status,
/// checks that need the whole object); nobody owns these fields.
pub fn prepare_create(t: &ResourceType, db: &Db, object: &mut Value) -> ApiResult<()> {
    match (t.group.as_str(), t.kind.as_str()) {
        ("", "Namespace") => {
            set(object, "/spec/finalizers", json!(["kubernetes"]));
            set(object, "/status", json!({"phase": "Active"}));
        }
        ("", "Service") => {
            service_addresses(db, object, None)?;
            set(object, "/status", json!({"loadBalancer": {}}));
        }
        ("", "Pod") => set(
            object,
            "/status",
            json!({"phase": "Pending", "qosClass": "BestEffort"}),
        ),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            crd::validate(object)?;
            crd::establish(object);
        }
        _ => {}
    }
    Ok(())
}

/// What the registry does to an update after admission.
pub fn prepare_update(t: &ResourceType, db: &Db, old: &Value, new: &mut Value) -> ApiResult<()> {
    match (t.group.as_str(), t.kind.as_str()) {
        ("", "Namespace") if new.pointer("/spec/finalizers").is_none() => {
            if let Some(f) = old.pointer("/spec/finalizers").cloned() {
                set(new, "/spec/finalizers", f);
            }
        }
        ("", "Service") => service_addresses(db, new, Some(old))?,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            crd::validate(new)?;
            if old.get("status").is_some() && new.get("status").is_none() {
                new["status"] = old["status"].clone();
            }
            crd::establish(new);
        }
        _ => {}
    }
    Ok(())
}

/// What follows a stored write.
pub fn after_commit(
    cluster: &Cluster,
    db: &mut Db,
    t: &ResourceType,
    stored: &Value,
    created: bool,
) -> ApiResult<()> {
    match (t.group.as_str(), t.kind.as_str()) {
        ("", "Namespace") if created => {
            cluster.namespace_created(db, meta::name(stored).unwrap_or(""));
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd::register(db, stored),
        _ => {}
    }
    Ok(())
}

/// What follows a completed deletion.
pub fn after_delete(
    cluster: &Cluster,
    db: &mut Db,
    t: &ResourceType,
    stored: &Value,
) -> ApiResult<()> {
    if t.group == "apiextensions.k8s.io" && t.kind == "CustomResourceDefinition" {
        let name = meta::name(stored).unwrap_or("").to_string();
        let types: Vec<_> = db
            .catalog
            .all()
            .filter(|t| t.crd.as_deref() == Some(&name))
            .cloned()
            .collect();
        if let Some(storage_type) = types.iter().find(|t| t.version == t.storage_version) {
            let objects = db
                .store
                .list(&storage_type.storage, None, None)
                .unwrap_or_default();
            for object in objects {
                if let Some(change) = cluster.remove(
                    db,
                    &Key {
                        storage: storage_type.storage.clone(),
                        namespace: meta::namespace(&object).unwrap_or("").to_string(),
                        name: meta::name(&object).unwrap_or("").to_string(),
                    },
                ) {
                    drop(change);
                }
            }
        }
        db.catalog.remove_crd(&name);
        return Ok(());
    }
    if t.namespaced
        && let Some(ns) = meta::namespace(stored)
        && db
            .store
            .get(&namespace_key(ns))
            .is_some_and(|n| meta::is_deleting(&n))
    {
        let ns = ns.to_string();
        finish_namespace(cluster, db, &ns);
    }
    Ok(())
}

/// Delete everything in a terminating namespace; the namespace goes when nothing is left.
pub fn empty_namespace(cluster: &Cluster, db: &mut Db, namespace: &str) -> ApiResult<()> {
    let mut storages: Vec<std::sync::Arc<ResourceType>> = Vec::new();
    for t in db.catalog.all() {
        if t.namespaced
            && t.behavior == crate::catalog::Behavior::Stored
            && !storages.iter().any(|s| s.storage == t.storage)
            && t.version == t.storage_version
        {
            storages.push(t.clone());
        }
    }
    for t in storages {
        let objects = db
            .store
            .list(&t.storage, Some(namespace), None)
            .unwrap_or_default();
        for object in objects {
            super::delete::remove_stored(cluster, db, &t, &object)?;
        }
    }
    finish_namespace(cluster, db, namespace);
    Ok(())
}

fn finish_namespace(cluster: &Cluster, db: &mut Db, namespace: &str) {
    let remaining = db.catalog.all().any(|t| {
        t.namespaced
            && db
                .store
                .list(&t.storage, Some(namespace), None)
                .is_ok_and(|objects| !objects.is_empty())
    });
    if !remaining {
        cluster.remove(db, &namespace_key(namespace));
    }
}
