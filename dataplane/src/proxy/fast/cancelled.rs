//! A cancellation token's wait for the fast engine's selects, which poll it several times a
//! request: once the wait is armed, a poll is one atomic load. tokio-util's own wait takes two
//! locks a poll (the token's, to read its flag, and its `Notify`'s, to look at the waiter);
//! here it is polled only to arm it and when it has rung. No crate offers a lock-free poll of a
//! `CancellationToken`, so this thin wrapper keeps the token (and everything that cancels it)
//! as it is.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// `token.cancelled_owned()`, cheap to poll again and again from one task.
pub(super) struct Cancelled {
    token: CancellationToken,
    wait: Pin<Box<WaitForCancellationFutureOwned>>,
    /// What the token's wait holds as its waker, once polled: rung by the cancel.
    alarm: Option<Arc<Alarm>>,
}

/// The waker the token's wait is given: it notes that it rang, then wakes the task.
struct Alarm {
    rang: AtomicBool,
    task: Waker,
}

impl Wake for Alarm {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.rang.store(true, Ordering::Release);
        self.task.wake_by_ref();
    }
}

impl Cancelled {
    pub(super) fn new(token: CancellationToken) -> Self {
        Self {
            wait: Box::pin(token.clone().cancelled_owned()),
            token,
            alarm: None,
        }
    }

    /// Whether the token is cancelled: an atomic load once the wait is armed (a cancel rings it
    /// before its canceller returns), the token's lock before.
    pub(super) fn is_cancelled(&self) -> bool {
        match &self.alarm {
            Some(alarm) => alarm.rang.load(Ordering::Acquire),
            None => self.token.is_cancelled(),
        }
    }
}

impl Future for Cancelled {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if let Some(alarm) = &this.alarm
            && !alarm.rang.load(Ordering::Acquire)
            && alarm.task.will_wake(cx.waker())
        {
            // Armed for this task and not rung: the token's wait still holds the alarm.
            return Poll::Pending;
        }
        // The first poll, a ring, or another task's: ask the token's wait, with a new alarm.
        let alarm = Arc::new(Alarm {
            rang: AtomicBool::new(false),
            task: cx.waker().clone(),
        });
        let waker = Waker::from(Arc::clone(&alarm));
        match this.wait.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(()) => {
                alarm.rang.store(true, Ordering::Release);
                this.alarm = Some(alarm);
                Poll::Ready(())
            }
            Poll::Pending => {
                this.alarm = Some(alarm);
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waker that counts its wakes.
    #[derive(Default)]
    struct Count(std::sync::atomic::AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(cancelled: &mut Cancelled, waker: &Waker) -> Poll<()> {
        Pin::new(cancelled).poll(&mut Context::from_waker(waker))
    }

    #[test]
    fn a_cancel_after_arming_wakes_the_task_and_the_next_poll_is_ready() {
        let token = CancellationToken::new();
        let mut cancelled = Cancelled::new(token.clone());
        let count = Arc::new(Count::default());
        let waker = Waker::from(Arc::clone(&count));
        assert!(!cancelled.is_cancelled());
        assert!(poll(&mut cancelled, &waker).is_pending());
        assert!(poll(&mut cancelled, &waker).is_pending(), "polled again");
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        token.cancel();
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "the cancel woke the task"
        );
        assert!(cancelled.is_cancelled());
        assert!(poll(&mut cancelled, &waker).is_ready());
        assert!(poll(&mut cancelled, &waker).is_ready(), "and stays ready");
    }

    #[test]
    fn a_token_cancelled_before_the_first_poll_is_ready_at_once() {
        let token = CancellationToken::new();
        let mut cancelled = Cancelled::new(token.clone());
        token.cancel();
        assert!(
            cancelled.is_cancelled(),
            "asks the token before it is armed"
        );
        let waker = Waker::from(Arc::new(Count::default()));
        assert!(poll(&mut cancelled, &waker).is_ready());
    }

    #[test]
    fn a_parents_cancel_reaches_a_child_tokens_wait() {
        let parent = CancellationToken::new();
        let mut cancelled = Cancelled::new(parent.child_token());
        let count = Arc::new(Count::default());
        let waker = Waker::from(Arc::clone(&count));
        assert!(poll(&mut cancelled, &waker).is_pending());
        parent.cancel();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(poll(&mut cancelled, &waker).is_ready());
    }

    #[test]
    fn another_tasks_poll_moves_the_wake_to_that_task() {
        let token = CancellationToken::new();
        let mut cancelled = Cancelled::new(token.clone());
        let first = Arc::new(Count::default());
        let second = Arc::new(Count::default());
        assert!(poll(&mut cancelled, &Waker::from(Arc::clone(&first))).is_pending());
        assert!(poll(&mut cancelled, &Waker::from(Arc::clone(&second))).is_pending());
        token.cancel();
        assert_eq!(
            second.0.load(Ordering::SeqCst),
            1,
            "the last poller is woken"
        );
        assert!(poll(&mut cancelled, &Waker::from(second)).is_ready());
    }

    #[tokio::test]
    async fn a_cancel_from_another_thread_ends_the_wait() {
        let token = CancellationToken::new();
        let mut cancelled = Cancelled::new(token.clone());
        let canceller = std::thread::spawn(move || token.cancel());
        (&mut cancelled).await;
        assert!(cancelled.is_cancelled());
        canceller.join().expect("the canceller ran");
    }
}
