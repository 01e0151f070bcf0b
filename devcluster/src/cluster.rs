//! The server's shared state: the object store and the catalog under one lock (so a CRD and
//! the types it defines change together), the change feed watches follow, the fault switches,
//! the request log, and the settings the server was started with. Writes commit here, so every
//! change reaches the watchers in resourceVersion order.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use crate::catalog::Catalog;
use crate::faults::Faults;
use crate::log::RequestLog;
use crate::meta;
use crate::store::{Change, Key, Store};

/// Who may do what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authorization {
    /// ServiceAccount-token requests are held to the stored RBAC rules; the admin is
    /// `system:masters`.
    Rbac,
    /// Every authenticated request is allowed.
    AlwaysAllow,
}

/// How the server was started.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The bearer token of the cluster-admin user the kubeconfig carries.
    pub admin_token: String,
    /// How often a watch that allows bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Changes kept for watches and consistent lists before older versions answer 410.
    pub history: usize,
    /// Key for signing ServiceAccount tokens.
    pub signing_key: Vec<u8>,
    /// `iss` of issued tokens.
    pub issuer: String,
    /// Shortest lifetime a TokenRequest may ask for (600 s on a real cluster; tests of token
    /// expiry set less).
    pub min_token_seconds: i64,
    /// How far past `exp` (and before `nbf`) a token is still accepted: go-jose's
    /// `jwt.DefaultLeeway`, a minute, as on a cluster. Tests of expiry set less.
    pub token_leeway: Duration,
    pub authorization: Authorization,
}

impl Default for Settings {
    fn default() -> Self {
        let mut key = vec![0u8; 32];
        rand::Rng::fill(&mut rand::rng(), key.as_mut_slice());
        Self {
            admin_token: format!("devcluster-admin-{}", meta::name_suffix()),
            bookmark_interval: Duration::from_secs(5),
            history: 20_000,
            signing_key: key,
            issuer: "https://kubernetes.default.svc.cluster.local".into(),
            min_token_seconds: crate::tokens::MIN_EXPIRATION_SECONDS,
            token_leeway: Duration::from_secs(60),
            authorization: Authorization::Rbac,
        }
    }
}

/// Everything one lock protects.
pub struct Db {
    pub store: Store,
    pub catalog: Catalog,
}

/// The server's state, shared by every connection.
pub struct Cluster {
    db: Mutex<Db>,
    changes: broadcast::Sender<Arc<Change>>,
    /// Bumped to end every open watch at once (a fault switch).
    watch_epoch: watch::Sender<u64>,
    pub faults: Faults,
    pub log: RequestLog,
    pub settings: Settings,
}

const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

// === impl Cluster ===

impl Cluster {
    pub fn new(settings: Settings) -> Arc<Self> {
        let (changes, _) = broadcast::channel(65_536);
        let (watch_epoch, _) = watch::channel(0);
        let cluster = Arc::new(Self {
            db: Mutex::new(Db {
                store: Store::new(settings.history),
                catalog: Catalog::builtin(),
            }),
            changes,
            watch_epoch,
            faults: Faults::default(),
            log: RequestLog::default(),
            settings,
        });
        cluster.seed();
        cluster
    }

    /// The namespaces and `default` ServiceAccounts every cluster starts with.
    fn seed(&self) {
        let mut db = self.db.lock();
        for ns in SYSTEM_NAMESPACES {
            let object = namespace_object(ns);
            let key = Key {
                storage: "namespaces".into(),
                namespace: String::new(),
                name: ns.to_string(),
            };
            self.commit(&mut db, key, object);
            self.namespace_created(&mut db, ns);
        }
    }

    /// What the namespace and ServiceAccount controllers do for a new namespace.
    pub fn namespace_created(&self, db: &mut Db, namespace: &str) {
        let key = Key {
            storage: "serviceaccounts".into(),
            namespace: namespace.into(),
            name: "default".into(),
        };
        if db.store.get(&key).is_none() {
            let sa = json!({
                "apiVersion": "v1", "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": namespace, "uid": meta::new_uid(),
                             "creationTimestamp": meta::now_rfc3339()},
            });
            self.commit(db, key, sa);
        }
    }

    pub fn lock(&self) -> parking_lot::MutexGuard<'_, Db> {
        self.db.lock()
    }

    /// Store `object` and tell the watchers.
    pub fn commit(&self, db: &mut Db, key: Key, object: Value) -> Arc<Change> {
        let change = db.store.put(key, object);
        let _ = self.changes.send(change.clone());
        change
    }

    /// Remove the object under `key` and tell the watchers.
    pub fn remove(&self, db: &mut Db, key: &Key) -> Option<Arc<Change>> {
        let change = db.store.delete(key)?;
        let _ = self.changes.send(change.clone());
        Some(change)
    }

    /// The live change feed; subscribe while holding the lock to miss nothing.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Change>> {
        self.changes.subscribe()
    }

    pub fn watch_epoch(&self) -> watch::Receiver<u64> {
        self.watch_epoch.subscribe()
    }

    /// End every open watch now.
    pub fn drop_watches(&self) {
        self.watch_epoch.send_modify(|e| *e += 1);
    }
}

/// A Namespace as the API server and namespace controller leave it after creation.
pub fn namespace_object(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "uid": meta::new_uid(), "creationTimestamp": meta::now_rfc3339(),
                     "labels": {"kubernetes.io/metadata.name": name}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}
