//! The access log's writer thread and where it writes. A file is followed through rotation:
//! at most once per `recheck` the writer looks at the path, and when it names another file (the
//! old one renamed away, as logrotate does by default) or none, the path is opened anew, so no
//! signal or restart is needed. `copytruncate` works without that, the file being opened for
//! appending. A flush marker in the queue is answered once every line before it is written.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;

use prometheus::IntCounter;
use tokio::time::Instant;

use super::Entry;

/// Lines formatted into one write.
const BATCH: usize = 256;

/// What waits in the queue for the writer. Entries stay unboxed (the queue held them by value
/// before there were markers): boxing would cost every logged request an allocation, for a
/// marker sent once at shutdown.
#[allow(clippy::large_enum_variant)]
pub(super) enum Queued {
    Entry(Entry),
    /// Answered once everything queued before it is written and flushed.
    Flush(SyncSender<()>),
}

/// Where the lines go.
pub(super) enum Output {
    Stdout(std::io::Stdout),
    File(Followed),
}

/// A file written by path, reopened when the path comes to name another file.
pub(super) struct Followed {
    path: PathBuf,
    file: File,
    /// Device and inode of `file`.
    id: (u64, u64),
    recheck: Duration,
    checked: Instant,
}

impl Followed {
    /// Open `path` for appending, creating it if missing.
    pub(super) fn open(path: &Path, recheck: Duration) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let meta = file.metadata()?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
            id: (meta.dev(), meta.ino()),
            recheck,
            checked: Instant::now(),
        })
    }

    /// Reopen the path if it no longer names the open file; at most once per `recheck`.
    fn follow(&mut self) {
        if self.checked.elapsed() < self.recheck {
            return;
        }
        self.checked = Instant::now();
        let same =
            std::fs::metadata(&self.path).is_ok_and(|meta| (meta.dev(), meta.ino()) == self.id);
        if same {
            return;
        }
        match Followed::open(&self.path, self.recheck) {
            Ok(reopened) => {
                *self = reopened;
                tracing::info!(path = %self.path.display(), "access log reopened: the file was moved or removed (rotated)");
            }
            // Keep writing to the file we have; the next check tries again.
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "cannot reopen the access log");
            }
        }
    }
}

impl Output {
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            Self::Stdout(out) => out.write_all(bytes).and_then(|()| out.flush()),
            Self::File(followed) => {
                followed.follow();
                followed.file.write_all(bytes)
            }
        }
    }
}

/// The writer thread: whatever is queued, formatted and written in one go, so a line is out as
/// soon as the writer is free. Ends when every sender is gone.
pub(super) fn run(queued: &Receiver<Queued>, mut out: Output, errors: &IntCounter) {
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut flushes = Vec::new();
    let mut failing = false;
    while let Ok(first) = queued.recv() {
        let mut count = 0u64;
        for item in std::iter::once(first).chain(queued.try_iter().take(BATCH - 1)) {
            match item {
                Queued::Entry(entry) => {
                    if entry.write_line(&mut buf).is_ok() {
                        count += 1;
                    }
                }
                Queued::Flush(done) => flushes.push(done),
            }
        }
        match out.write_all(&buf) {
            Ok(()) if failing => {
                failing = false;
                tracing::info!("access log written again");
            }
            Ok(()) => {}
            Err(error) => {
                errors.inc_by(count);
                if !failing {
                    failing = true;
                    tracing::warn!(%error, "access log write failed; its lines are dropped until a write succeeds");
                }
            }
        }
        buf.clear();
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}
