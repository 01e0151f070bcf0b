//! The opt-in access log (`--access-log PATH|-`): one JSON line per sampled request, written
//! by a thread of its own so the request path never waits on a disk or a pipe. A finished
//! request hands its [`Entry`] to a bounded channel without blocking; when the channel is full
//! (the writer cannot keep up) the line is dropped and counted in
//! `rollcall_access_log_dropped_total{reason="full"}`, and lines a failing write loses in
//! `{reason="write_error"}`: logging can slow or stall no request. Off, the default, it costs a
//! request one branch; on, a request sampled out costs one random number.
//!
//! std's bounded channel rather than tokio's: the receiving end is a plain thread (a blocking
//! writer must not sit on the one runtime thread the sidecar has by default), and a full
//! channel must refuse at once, which `try_send` does. A log file is followed through rotation
//! (`writer`), and at shutdown the sidecar waits, briefly, for the lines already queued
//! ([`AccessLog::flush`]).

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::Duration;

use prometheus::IntCounter;
use rand::Rng;

mod entry;
mod writer;

pub use entry::{End, Entry, path_of};
use writer::{Followed, Output, Queued};

/// Lines waiting for the writer before new ones are dropped (about 1 MB of entries).
pub const CAPACITY: usize = 4096;

/// How often the writer checks whether a log file's path still names the file it writes.
pub const REOPEN_CHECK: Duration = Duration::from_secs(1);

/// Where the lines go and how many requests get one.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessLogConfig {
    pub destination: Destination,
    /// The share of requests logged, 0 to 1.
    pub sample: f64,
}

/// Where the lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// `-`: standard output, beside the log.
    Stdout,
    /// A file, created if missing, appended to.
    File(PathBuf),
}

/// The access log the request path writes to.
pub struct AccessLog {
    sample: f64,
    lines: SyncSender<Queued>,
    dropped_full: IntCounter,
}

impl FromStr for Destination {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "" => Err("an access log path, or - for standard output".into()),
            "-" => Ok(Self::Stdout),
            path => Ok(Self::File(path.into())),
        }
    }
}

/// `--access-log-sample`: a share from 0 to 1.
pub fn parse_sample(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(share) if (0.0..=1.0).contains(&share) => Ok(share),
        _ => Err(format!(
            "{s:?} is not a share from 0 to 1 (0.1 logs one request in ten)"
        )),
    }
}

impl AccessLog {
    /// Open the destination and start the writer thread. `dropped` is
    /// `rollcall_access_log_dropped_total` (labelled by `reason`).
    pub fn open(
        config: &AccessLogConfig,
        dropped: &prometheus::IntCounterVec,
    ) -> std::io::Result<Arc<Self>> {
        Self::open_checking(config, dropped, REOPEN_CHECK)
    }

    /// [`AccessLog::open`], with a file's path checked for rotation every `recheck` (tests
    /// check at every write).
    fn open_checking(
        config: &AccessLogConfig,
        dropped: &prometheus::IntCounterVec,
        recheck: Duration,
    ) -> std::io::Result<Arc<Self>> {
        let out = match &config.destination {
            Destination::Stdout => Output::Stdout(std::io::stdout()),
            Destination::File(path) => {
                Output::File(Followed::open(path, recheck).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot open the access log {}: {e}", path.display()),
                    )
                })?)
            }
        };
        let (lines, queued) = std::sync::mpsc::sync_channel(CAPACITY);
        let dropped_full = dropped.with_label_values(&["full"]);
        let write_errors = dropped.with_label_values(&["write_error"]);
        std::thread::Builder::new()
            .name("rollcall-access-log".into())
            .spawn(move || writer::run(&queued, out, &write_errors))?;
        tracing::info!(destination = ?config.destination, sample = config.sample, "access log on");
        Ok(Arc::new(Self {
            sample: config.sample,
            lines,
            dropped_full,
        }))
    }

    /// Whether this request gets a line.
    pub fn sampled(&self) -> bool {
        self.sample >= 1.0 || (self.sample > 0.0 && rand::rng().random::<f64>() < self.sample)
    }

    /// Hand a finished request to the writer; never waits.
    pub fn write(&self, entry: Entry) {
        match self.lines.try_send(Queued::Entry(entry)) {
            Ok(()) => {}
            // The writer only ends by panicking: its lines are dropped as if it were full.
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => self.dropped_full.inc(),
        }
    }

    /// Wait, at most `within`, until every line handed over before this call is written: at
    /// shutdown, so the last requests' lines do not die with the process. `false` when the
    /// writer did not get there in time (a stalled disk or pipe); the lines are then lost.
    pub async fn flush(&self, within: Duration) -> bool {
        let lines = self.lines.clone();
        // The marker waits for room behind the queued lines, and the answer for the writer:
        // both block, so off the runtime's thread.
        let waited = tokio::task::spawn_blocking(move || {
            let (done, written) = std::sync::mpsc::sync_channel(1);
            lines.send(Queued::Flush(done)).is_ok() && written.recv().is_ok()
        });
        matches!(tokio::time::timeout(within, waited).await, Ok(Ok(true)))
    }
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessLog")
            .field("sample", &self.sample)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::mpsc::Receiver;

    use super::*;

    #[test]
    fn a_sample_is_a_share_from_zero_to_one() {
        assert_eq!(parse_sample("0"), Ok(0.0));
        assert_eq!(parse_sample("0.25"), Ok(0.25));
        assert_eq!(parse_sample("1"), Ok(1.0));
        for bad in ["-0.1", "1.5", "NaN", "ten", ""] {
            assert!(parse_sample(bad).is_err(), "{bad}");
        }
        assert_eq!("-".parse(), Ok(Destination::Stdout));
        assert_eq!(
            "/var/log/access.json".parse(),
            Ok(Destination::File("/var/log/access.json".into()))
        );
        assert!("".parse::<Destination>().is_err());
    }

    fn log(sample: f64, capacity: usize) -> (AccessLog, Receiver<Queued>, IntCounter) {
        let dropped = IntCounter::new("dropped", "test").expect("a counter");
        let (lines, queued) = std::sync::mpsc::sync_channel(capacity);
        let log = AccessLog {
            sample,
            lines,
            dropped_full: dropped.clone(),
        };
        (log, queued, dropped)
    }

    #[test]
    fn sampling_at_zero_takes_none_and_at_one_takes_all() {
        assert!((0..1000).all(|_| !log(0.0, 1).0.sampled()));
        assert!((0..1000).all(|_| log(1.0, 1).0.sampled()));
        let (half, _, _) = log(0.5, 1);
        let taken = (0..10_000).filter(|_| half.sampled()).count();
        // 10,000 draws at one half: 5,000 ± 50 is one standard deviation; 6 of them here.
        assert!((4700..=5300).contains(&taken), "{taken}");
    }

    fn entry() -> Entry {
        Entry {
            start: std::time::SystemTime::UNIX_EPOCH,
            pool: "web".into(),
            method: http::Method::GET,
            authority: None,
            path: "/".into(),
            version: http::Version::HTTP_11,
            status: 200,
            reason: None,
            endpoint: None,
            tries: 1,
            duration: Duration::ZERO,
            first_byte: None,
            request_bytes: 0,
            response_bytes: 0,
            end: End::Complete,
        }
    }

    #[test]
    fn a_full_queue_drops_the_line_and_counts_it() {
        let (log, queued, dropped) = log(1.0, 2);
        for _ in 0..5 {
            log.write(entry());
        }
        assert_eq!(
            queued.try_iter().count(),
            2,
            "what the queue holds is written"
        );
        assert_eq!(dropped.get(), 3, "the rest were dropped, and counted");
    }

    fn to_file(path: &Path) -> AccessLogConfig {
        AccessLogConfig {
            destination: Destination::File(path.to_path_buf()),
            sample: 1.0,
        }
    }

    fn dropped() -> prometheus::IntCounterVec {
        prometheus::IntCounterVec::new(prometheus::Opts::new("dropped", "test"), &["reason"])
            .expect("a counter")
    }

    fn lines(path: &Path) -> usize {
        std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
    }

    #[tokio::test]
    async fn a_flush_returns_once_every_line_handed_over_before_it_is_in_the_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("access.json");
        let log = AccessLog::open(&to_file(&path), &dropped()).expect("opened");
        for _ in 0..300 {
            log.write(entry());
        }
        assert!(log.flush(Duration::from_secs(10)).await);
        assert_eq!(lines(&path), 300);
    }

    #[tokio::test]
    async fn a_log_file_renamed_or_removed_is_followed_by_a_new_one_at_its_path() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("access.json");
        let log =
            AccessLog::open_checking(&to_file(&path), &dropped(), Duration::ZERO).expect("opened");
        log.write(entry());
        assert!(log.flush(Duration::from_secs(10)).await);
        // Rotated as logrotate does by default: renamed away, the writer not told.
        let rotated = dir.path().join("access.json.1");
        std::fs::rename(&path, &rotated).expect("renamed");
        log.write(entry());
        log.write(entry());
        assert!(log.flush(Duration::from_secs(10)).await);
        assert_eq!(
            lines(&rotated),
            1,
            "the old file keeps what was written before"
        );
        assert_eq!(
            lines(&path),
            2,
            "what came after is in a new file at the path"
        );
        // Removed outright: the same.
        std::fs::remove_file(&path).expect("removed");
        log.write(entry());
        assert!(log.flush(Duration::from_secs(10)).await);
        assert_eq!(lines(&path), 1);
    }
}
