//! Leader election on its own thread and runtime, with its own API client. The main runtime
//! decodes every sidecar's reports; when a fleet connects at once (measured with the fleet
//! benchmark: 1,000 sidecars each reporting on 10,000 endpoints) its workers are busy for
//! seconds, and a lease read or renewal queued behind that work timed out until the leader gave
//! up a lead nobody contested. Here renewals and confirmations run on a runtime nothing else
//! uses, over connections nothing else queues on, so only a real partition or API server
//! failure ends a lead. The operations port (`/readyz`, `/livez`, `/metrics`) is served here
//! too, so the kubelet's probes are answered while the main runtime is busy.

use std::future::Future;

use kube::Client;
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio_util::task::AbortOnDropHandle;

use crate::{Error, Result};

/// The election's runtime; dropping it stops the thread (and whatever still runs there).
pub struct LeaseRuntime {
    handle: Handle,
    client: Client,
    _stop: oneshot::Sender<()>,
}

impl std::fmt::Debug for LeaseRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseRuntime").finish_non_exhaustive()
    }
}

// === impl LeaseRuntime ===

impl LeaseRuntime {
    /// Start the thread and build a client for `config` on it.
    pub fn start(config: kube::Config) -> Result<Self> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("rollcall-lease".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = ready_tx.send(Err(Error::LeaseRuntime(e.to_string())));
                        return;
                    }
                };
                // The client's connection tasks are spawned where it is built: here.
                let client = runtime.block_on(async { Client::try_from(config) });
                let answer = client
                    .map(|client| (runtime.handle().clone(), client))
                    .map_err(Error::Kube);
                if ready_tx.send(answer).is_err() {
                    return;
                }
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| Error::LeaseRuntime(e.to_string()))?;
        let (handle, client) = ready_rx
            .recv()
            .map_err(|e| Error::LeaseRuntime(e.to_string()))??;
        Ok(Self {
            handle,
            client,
            _stop: stop,
        })
    }

    /// The client whose connections live on this runtime.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Start `work` on this runtime (for a task that must keep answering while the main
    /// runtime is busy: the operations port's readiness).
    pub fn spawn<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> tokio::task::JoinHandle<T> {
        self.handle.spawn(work)
    }

    /// Run `work` on this runtime and wait for it from any other; dropping the returned
    /// future stops the work.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T> {
        AbortOnDropHandle::new(self.handle.spawn(work))
            .await
            .map_err(|e| Error::LeaseRuntime(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_runs_on_the_lease_thread_even_while_the_caller_is_busy() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let runtime = LeaseRuntime::start(config).unwrap();
        // Hog the caller's (single-threaded) runtime: work on the lease thread still runs.
        let (tx, rx) = std::sync::mpsc::channel();
        let name = runtime.handle.spawn(async move {
            let _ = tx.send(std::thread::current().name().map(str::to_owned));
        });
        // A blocking wait: the caller's runtime cannot run anything meanwhile.
        let seen = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the lease thread ran the work");
        assert_eq!(seen.as_deref(), Some("rollcall-lease"));
        name.await.unwrap();
        let answer = runtime.run(async { 7 }).await.unwrap();
        assert_eq!(answer, 7);
    }
}
