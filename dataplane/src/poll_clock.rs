//! The request path's clock: one reading of the monotonic clock per poll of a connection's task.
//!
//! A proxied request asks the time a dozen times (arrival, the try's start and end, the body's
//! completion, the connection's return to the pool, the request's duration), nearly all of them
//! within the same poll of its connection's task, microseconds apart. Each reading is a vDSO call
//! (about 28 ns on the benchmark VM; 2.8% of the sidecar's CPU per small request). [`now`]
//! inside a task wrapped in [`scoped`] reads the clock once, at the first ask of each poll, and
//! gives every later ask in that poll the same instant: the error is bounded by the length of
//! one poll, which on the request path is a few microseconds of CPU, never a wait (a wait ends
//! the poll). HAProxy keeps its `now` the same way, once per turn of its event loop.
//!
//! hyper's HTTP/2 streams are tasks of their own, spawned through [`ScopedExecutor`]. A poll that
//! blocks (a log line written to a full pipe) makes its reading late by that much.
//!
//! Outside a scoped task (the pool's owner, whose polls can apply a whole roster; probes; tests
//! calling a function directly), [`now`] reads the clock every time. The reading is tokio's
//! [`Instant::now`], so a test's paused clock holds. No crate offers this: clock crates cache per
//! interval on a thread of their own (coarse to milliseconds) or read the TSC themselves (not
//! tokio's instants, and blind to the paused clock).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::time::Instant;

/// Where this thread stands.
#[derive(Clone, Copy)]
enum Reading {
    /// Not inside a scoped poll: every ask reads the clock.
    Outside,
    /// Inside one, not asked yet.
    Unread,
    /// Inside one, read at this instant.
    Read(Instant),
}

thread_local! {
    static READING: Cell<Reading> = const { Cell::new(Reading::Outside) };
}

/// Now: the instant first read in this poll of a scoped task, or the clock itself outside one.
pub fn now() -> Instant {
    READING.with(|reading| match reading.get() {
        Reading::Read(at) => at,
        Reading::Unread => {
            let at = Instant::now();
            reading.set(Reading::Read(at));
            at
        }
        Reading::Outside => Instant::now(),
    })
}

/// The time since `earlier`, by [`now`].
pub fn since(earlier: Instant) -> std::time::Duration {
    now().saturating_duration_since(earlier)
}

/// `task` with [`now`] read once per poll.
pub fn scoped<F: Future>(task: F) -> Scoped<F> {
    Scoped { task }
}

pin_project_lite::pin_project! {
    /// A task whose polls each read the clock at most once ([`scoped`]).
    pub struct Scoped<F> {
        #[pin]
        task: F,
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let outermost = READING.with(|reading| {
            let outside = matches!(reading.get(), Reading::Outside);
            if outside {
                reading.set(Reading::Unread);
            }
            outside
        });
        if !outermost {
            // Already inside a scoped poll (a scoped future inside another): its reading holds.
            return self.project().task.poll(cx);
        }
        let _leave = Leave;
        self.project().task.poll(cx)
    }
}

/// hyper's executor for the tasks it spawns (each stream of an HTTP/2 connection, client or
/// endpoint side): tokio's, with each task [`scoped`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ScopedExecutor;

impl<F> hyper::rt::Executor<F> for ScopedExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, task: F) {
        tokio::spawn(scoped(task));
    }
}

/// Puts the thread back outside when the outermost scoped poll ends, unwinding included.
struct Leave;

impl Drop for Leave {
    fn drop(&mut self) {
        READING.with(|reading| reading.set(Reading::Outside));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Polls `f` once, as a task's poll would.
    fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        std::pin::pin!(f).poll(&mut cx)
    }

    fn ready<T>(polled: Poll<T>) -> T {
        match polled {
            Poll::Ready(value) => value,
            Poll::Pending => panic!("the future was meant to finish in one poll"),
        }
    }

    #[test]
    fn one_poll_reads_the_clock_once() {
        let (first, second, clock) = ready(poll_once(scoped(async {
            let first = now();
            std::thread::sleep(Duration::from_millis(2));
            (first, now(), Instant::now())
        })));
        assert_eq!(
            second, first,
            "a second ask in the same poll reads nothing new"
        );
        assert!(clock - first >= Duration::from_millis(2));
        let waited = ready(poll_once(scoped(async {
            let first = now();
            std::thread::sleep(Duration::from_millis(2));
            since(first)
        })));
        assert_eq!(
            waited,
            Duration::ZERO,
            "`since` reads this poll's instant too"
        );
    }

    #[tokio::test]
    async fn tasks_hyper_spawns_are_scoped() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        hyper::rt::Executor::execute(&ScopedExecutor, async move {
            let first = now();
            std::thread::sleep(Duration::from_millis(2));
            let _ = tx.send((first, now()));
        });
        let (first, second) = rx.await.expect("the spawned task ran");
        assert_eq!(first, second);
    }

    #[test]
    fn outside_a_scope_every_ask_reads_the_clock() {
        let before = ready(poll_once(scoped(async { now() })));
        let first = now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(now() - first >= Duration::from_millis(2));
        assert!(first >= before);
    }

    #[tokio::test(start_paused = true)]
    async fn each_poll_reads_anew_and_the_paused_clock_holds() {
        let start = Instant::now();
        let (first, after_wait) = scoped(async {
            let first = now();
            tokio::time::sleep(Duration::from_millis(5)).await;
            (first, now())
        })
        .await;
        assert_eq!(first, start);
        assert_eq!(after_wait - first, Duration::from_millis(5));
    }

    #[test]
    fn a_scope_inside_a_scope_keeps_the_outer_reading() {
        let (outer, inner, after) = ready(poll_once(scoped(async {
            let outer = now();
            std::thread::sleep(Duration::from_millis(2));
            let inner = ready(poll_once(scoped(async { now() })));
            (outer, inner, now())
        })));
        assert_eq!(inner, outer);
        assert_eq!(
            after, outer,
            "the inner scope's end does not leave the outer one"
        );
    }

    #[test]
    fn a_panicking_poll_leaves_the_thread_outside() {
        let panicked = std::panic::catch_unwind(|| {
            ready(poll_once(scoped(async {
                let _ = now();
                panic!("the task fails mid-poll");
            })))
        });
        assert!(panicked.is_err());
        let first = now();
        std::thread::sleep(Duration::from_millis(2));
        assert!(
            now() - first >= Duration::from_millis(2),
            "the thread reads the clock again"
        );
    }
}
