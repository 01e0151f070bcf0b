//! Picks up a changed config file without a restart. The file is looked at every `interval` and
//! re-read at once on SIGHUP. A file whose identity, size and change times are as they were is not
//! read again (a 5,000-endpoint roster file is 175 KB; reading it every second kept that much of
//! the heap resident), and one whose bytes did not change (same SHA-256, so a large roster file
//! is not kept twice in memory) is not re-parsed. Polling rather than inotify because Kubernetes
//! updates a mounted ConfigMap by swapping a symlink, which file-event watchers miss unless
//! they watch the right directory, while a read every second is cheap and always right. A
//! refused file is logged with its reason and counted; the last good config keeps serving.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::io::Read;

use ring::digest::{Context, Digest, SHA256, digest};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::SidecarConfig;
use crate::metrics::Metrics;

/// One version of a file as its metadata tells it, without reading it: which file (a ConfigMap
/// update swaps a symlink to a new one), its size, and when its content and its inode last
/// changed, to the nanosecond (the inode's change time cannot be set back by anyone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileVersion {
    dev: u64,
    ino: u64,
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

/// How recent a change must have been, when the file was last read, for its version to be
/// distrusted: file times are kept at the kernel's clock tick (milliseconds), so a write in the
/// same tick as the read before it shows the same version. Until a read that began this long
/// after the file's last change, the file is read whatever its version says (git's "racily
/// clean" rule: measured from the read, not from now, so a long `--reload-interval` cannot
/// turn a racy read into a trusted one).
const RACY: Duration = Duration::from_secs(2);

impl FileVersion {
    /// When the inode last changed, if the time is after 1970.
    fn changed_at(&self) -> Option<SystemTime> {
        let secs = u64::try_from(self.changed.0).ok()?;
        let nanos = u32::try_from(self.changed.1).ok()?;
        UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
    }
}

/// Whether the watcher must read the file: asked to (SIGHUP), its version cannot be told or
/// differs from the one last read, or the last read (whose look began at `last_read`) came so
/// soon after the file changed (within [`RACY`], or before it) that a later write could hide
/// behind the same version.
fn must_read(
    forced: bool,
    version: Option<FileVersion>,
    last: Option<FileVersion>,
    last_read: SystemTime,
) -> bool {
    let Some(version) = version else {
        return true;
    };
    let settled = version
        .changed_at()
        .and_then(|at| last_read.duration_since(at).ok())
        .is_some_and(|age| age >= RACY);
    forced || Some(version) != last || !settled
}

/// The SHA-256 of the file at `path`, read through an 8 KiB buffer on the stack.
fn digest_file(path: &Path) -> std::io::Result<Digest> {
    let mut file = std::fs::File::open(path)?;
    let mut context = Context::new(&SHA256);
    let mut buffer = [0u8; 8192];
    loop {
        match file.read(&mut buffer) {
            Ok(0) => return Ok(context.finish()),
            Ok(n) => context.update(&buffer[..n]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
}

/// The version of the file at `path` (following symlinks) now.
pub fn version_of(path: &Path) -> std::io::Result<FileVersion> {
    let meta = std::fs::metadata(path)?;
    Ok(FileVersion {
        dev: meta.dev(),
        ino: meta.ino(),
        len: meta.len(),
        modified: (meta.mtime(), meta.mtime_nsec()),
        changed: (meta.ctime(), meta.ctime_nsec()),
    })
}

/// Watch `path`, publishing each new valid config on `tx`. `loaded` is the text the running
/// config came from and `version` the file's version looked at before that text was read (the
/// look beginning at `looked_at`), so a change made between loading and watching is not missed.
pub fn spawn(
    path: PathBuf,
    loaded: Vec<u8>,
    version: Option<FileVersion>,
    looked_at: SystemTime,
    interval: Duration,
    tx: mpsc::Sender<SidecarConfig>,
    metrics: Arc<Metrics>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            Ok(s) => Some(s),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGHUP; reloading on file change only");
                None
            }
        };
        let mut last_digest: Option<Digest> = Some(digest(&SHA256, &loaded));
        drop(loaded);
        let mut last_version = version;
        let mut last_read = looked_at;
        loop {
            let forced = tokio::select! {
                _ = tokio::time::sleep(interval) => false,
                Some(()) = async { match hangup.as_mut() { Some(s) => s.recv().await, None => std::future::pending().await } } => true,
            };
            // Looked at before the read: a change during the read shows as a new version at the
            // next look, and the digest then says whether the text really changed.
            let looked_at = SystemTime::now();
            let version = version_of(&path).ok();
            if !must_read(forced, version, last_version, last_read) {
                continue;
            }
            last_version = version;
            last_read = looked_at;
            // Streamed through the digest first: while the file is as it was, nothing of its
            // size is allocated (and left resident by the allocator) at every look.
            if !forced
                && let Ok(streamed) = digest_file(&path)
                && last_digest.as_ref().map(Digest::as_ref) == Some(streamed.as_ref())
            {
                continue;
            }
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(error) => {
                    if forced || last_digest.is_some() {
                        tracing::warn!(path = %path.display(), %error, "config file unreadable; keeping the last good config");
                        metrics.config_reloads.with_label_values(&["error"]).inc();
                    }
                    last_digest = None;
                    last_version = None;
                    continue;
                }
            };
            let seen = digest(&SHA256, &bytes);
            if !forced && last_digest.as_ref().map(Digest::as_ref) == Some(seen.as_ref()) {
                continue;
            }
            last_digest = Some(seen);
            let text = String::from_utf8_lossy(&bytes);
            match SidecarConfig::parse(&text, &path.display().to_string()) {
                Ok(config) => {
                    metrics.config_reloads.with_label_values(&["applied"]).inc();
                    tracing::info!(path = %path.display(), pools = config.pools.len(), "config reloaded");
                    if tx.send(config).await.is_err() {
                        return;
                    }
                }
                Err(error) => {
                    metrics.config_reloads.with_label_values(&["refused"]).inc();
                    tracing::error!(%error, "config refused; keeping the last good config");
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(changed_secs: i64, len: u64) -> FileVersion {
        FileVersion {
            dev: 1,
            ino: 2,
            len,
            modified: (changed_secs, 0),
            changed: (changed_secs, 0),
        }
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_settled_file_whose_version_is_unchanged_is_not_read() {
        let v = version(1_000, 10);
        assert!(!must_read(false, Some(v), Some(v), at(1_002)));
        assert!(!must_read(false, Some(v), Some(v), at(5_000)));
    }

    #[test]
    fn a_new_version_a_missing_one_or_a_hangup_is_read() {
        let v = version(1_000, 10);
        let last = Some(v);
        assert!(
            must_read(false, Some(version(1_000, 11)), last, at(5_000)),
            "size"
        );
        assert!(
            must_read(false, Some(version(1_001, 10)), last, at(5_000)),
            "times"
        );
        let other_file = FileVersion { ino: 3, ..v };
        assert!(
            must_read(false, Some(other_file), last, at(5_000)),
            "replaced"
        );
        assert!(must_read(false, None, last, at(5_000)), "cannot be told");
        assert!(
            must_read(false, Some(v), None, at(5_000)),
            "nothing read yet"
        );
        assert!(must_read(true, Some(v), last, at(5_000)), "SIGHUP");
    }

    #[test]
    fn a_file_read_within_the_racy_window_of_its_change_is_read_again_whatever_its_version() {
        let v = version(1_000, 10);
        // Read in the same clock tick as the write: a second write in that tick would show this
        // same version however long ago the read was.
        assert!(must_read(false, Some(v), Some(v), at(1_000)));
        assert!(
            must_read(false, Some(v), Some(v), at(1_001)),
            "1 s: still racy"
        );
        assert!(
            !must_read(false, Some(v), Some(v), at(1_002)),
            "2 s: settled"
        );
        assert!(
            must_read(false, Some(v), Some(v), at(999)),
            "read before the change"
        );
        let before_1970 = version(-5, 10);
        assert!(must_read(
            false,
            Some(before_1970),
            Some(before_1970),
            at(5_000)
        ));
    }

    #[test]
    fn a_file_replaced_by_another_has_another_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sidecar.yaml");
        std::fs::write(&path, "pools: []\n").unwrap();
        let first = version_of(&path).unwrap();
        assert_eq!(version_of(&path).unwrap(), first, "looked at, not changed");

        // A ConfigMap update: a new file (same length) renamed over the old name.
        let staged = dir.path().join("staged.yaml");
        std::fs::write(&staged, "pools: [ ]").unwrap();
        std::fs::rename(&staged, &path).unwrap();
        let replaced = version_of(&path).unwrap();
        assert_eq!(replaced.len, first.len);
        assert_ne!(replaced.ino, first.ino, "another file");
        assert_ne!(replaced, first);
    }

    #[test]
    fn a_streamed_digest_is_the_digest_of_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sidecar.yaml");
        // Several buffers' worth and a partial one.
        let text: Vec<u8> = (0..30_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &text).unwrap();
        let streamed = digest_file(&path).unwrap();
        assert_eq!(streamed.as_ref(), digest(&SHA256, &text).as_ref());
        std::fs::write(&path, b"").unwrap();
        assert_eq!(
            digest_file(&path).unwrap().as_ref(),
            digest(&SHA256, b"").as_ref()
        );
    }

    #[test]
    fn a_missing_file_has_no_version() {
        let dir = tempfile::tempdir().unwrap();
        assert!(version_of(&dir.path().join("absent.yaml")).is_err());
    }
}
