//! The idle limit of an upgraded tunnel (HAProxy's `timeout tunnel`): each side's bytes mark
//! the tunnel active, and [`Activity::idle_for`] resolves once neither side has moved a byte
//! for the limit, so a WebSocket nobody uses stops holding its endpoint's in-flight slot and
//! two sockets forever.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// When a tunnel last moved a byte, shared by both of its sides.
#[derive(Clone, Debug)]
pub struct Activity {
    start: Instant,
    /// Milliseconds after `start`.
    last: Arc<AtomicU64>,
}

impl Activity {
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            last: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Rounded up to the millisecond: rounded down, the last byte could be dated up to a
    /// millisecond early and the tunnel closed that much before its limit (a test saw it).
    fn touch(&self) {
        let millis = self.start.elapsed().as_nanos().div_ceil(1_000_000);
        let ms = u64::try_from(millis).unwrap_or(u64::MAX);
        self.last.fetch_max(ms, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }

    /// Resolves once nothing moved for `limit`; never with a zero limit (disabled).
    pub async fn idle_for(&self, limit: Duration) {
        if limit.is_zero() {
            return std::future::pending().await;
        }
        loop {
            let deadline = self.last() + limit;
            if Instant::now() >= deadline {
                return;
            }
            tokio::time::sleep_until(deadline).await;
        }
    }

    /// `io` with every byte it moves marking this tunnel active.
    pub fn track<T>(&self, io: T) -> Tracked<T> {
        Tracked {
            io,
            activity: self.clone(),
            read: 0,
        }
    }
}

/// One side of a tunnel that reports its traffic to the tunnel's [`Activity`], and counts the
/// bytes read from it (what that side sent through the tunnel, for the access log).
pub struct Tracked<T> {
    io: T,
    activity: Activity,
    read: u64,
}

impl<T> Tracked<T> {
    /// Bytes read from this side so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let got = buf.filled().len().saturating_sub(before);
        if matches!(polled, Poll::Ready(Ok(()))) && got > 0 {
            self.read += got as u64;
            self.activity.touch();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, data);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_only_once_the_limit_passed_without_a_byte_and_never_when_disabled() {
        let activity = Activity::new();
        let limit = Duration::from_millis(300);
        let (client, mut server) = tokio::io::duplex(64);
        let mut side = activity.track(client);
        tokio::time::sleep(Duration::from_millis(100)).await;
        side.write_all(b"x").await.unwrap();
        let byte = Instant::now();
        let mut one = [0u8; 1];
        server.read_exact(&mut one).await.unwrap();
        activity.idle_for(limit).await;
        let waited = byte.elapsed();
        assert!(
            waited >= limit && waited < limit * 2,
            "the byte moved the deadline: {waited:?}"
        );
        // Bytes read count too.
        server.write_all(b"y").await.unwrap();
        side.read_exact(&mut one).await.unwrap();
        assert_eq!(side.bytes_read(), 1, "bytes read from the side are counted");
        let read = Instant::now();
        activity.idle_for(limit).await;
        let waited = read.elapsed();
        assert!(waited >= limit && waited < limit * 2, "{waited:?}");
        // Disabled: still pending.
        let off = activity.idle_for(Duration::ZERO);
        assert!(
            tokio::time::timeout(Duration::from_millis(400), off)
                .await
                .is_err()
        );
    }
}
