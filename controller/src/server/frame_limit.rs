//! The size of each gRPC message a caller sends, checked on its 5-byte length prefix as the
//! bytes arrive, before tonic reserves room for the message it announces (tonic's decoder
//! reserves the declared length). A prefix declaring more than its method allows ends the body
//! with OUT_OF_RANGE, naming both sizes; the bytes already read are passed on untouched.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body_util::combinators::UnsyncBoxBody;
use hyper::body::{Body, Frame, SizeHint};
use tonic::Status;

/// Where the reader of a gRPC body stands: inside a 5-byte length prefix, or inside a message
/// with so many bytes left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Prefix { read: usize, len: [u8; 4] },
    Message { left: usize },
}

/// A request body whose gRPC messages may declare at most `limit` bytes each: the first
/// prefix that declares more ends the body with OUT_OF_RANGE, which tonic passes on to the
/// caller, before it has reserved anything for the message.
pub struct SizeGuarded {
    inner: UnsyncBoxBody<Bytes, hyper::Error>,
    limit: usize,
    framing: Framing,
    on_refusal: Option<Box<dyn FnOnce() + Send>>,
}

impl SizeGuarded {
    pub fn new(
        inner: UnsyncBoxBody<Bytes, hyper::Error>,
        limit: usize,
        on_refusal: impl FnOnce() + Send + 'static,
    ) -> Self {
        Self {
            inner,
            limit,
            framing: Framing::Prefix {
                read: 0,
                len: [0; 4],
            },
            on_refusal: Some(Box::new(on_refusal)),
        }
    }

    /// Follow the framing over `data`; the size a prefix declared when it is over the limit.
    pub(crate) fn check(&mut self, mut data: &[u8]) -> Result<(), usize> {
        while !data.is_empty() {
            match &mut self.framing {
                Framing::Message { left } => {
                    let n = (*left).min(data.len());
                    *left -= n;
                    data.advance(n);
                    if *left == 0 {
                        self.framing = Framing::Prefix {
                            read: 0,
                            len: [0; 4],
                        };
                    }
                }
                Framing::Prefix { read, len } => {
                    // Byte 0 is the compression flag, bytes 1-4 the length, big-endian.
                    if *read > 0 {
                        len[*read - 1] = data[0];
                    }
                    *read += 1;
                    data.advance(1);
                    if *read == 5 {
                        let declared = u32::from_be_bytes(*len) as usize;
                        if declared > self.limit {
                            return Err(declared);
                        }
                        self.framing = if declared == 0 {
                            Framing::Prefix {
                                read: 0,
                                len: [0; 4],
                            }
                        } else {
                            Framing::Message { left: declared }
                        };
                    }
                }
            }
        }
        Ok(())
    }
}

impl Body for SizeGuarded {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => frame,
            Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => return Poll::Pending,
        };
        if let Some(data) = frame.data_ref()
            && let Err(declared) = self.check(data)
        {
            if let Some(count) = self.on_refusal.take() {
                count();
            }
            let limit = self.limit;
            return Poll::Ready(Some(Err(Box::new(Status::out_of_range(format!(
                "a message of {declared} bytes is over this method's limit of {limit} bytes"
            ))))));
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use http_body_util::{BodyExt, Full};

    use super::*;

    fn prefix(len: u32) -> Vec<u8> {
        let mut p = vec![0];
        p.extend_from_slice(&len.to_be_bytes());
        p
    }

    fn guarded(chunks: Vec<Vec<u8>>, limit: usize) -> SizeGuarded {
        let stream = futures_util::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, hyper::Error>(Frame::data(Bytes::from(c)))),
        );
        let body = http_body_util::StreamBody::new(stream);
        SizeGuarded::new(UnsyncBoxBody::new(body), limit, || {})
    }

    async fn read_all(mut body: SizeGuarded) -> Result<Vec<u8>, Status> {
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => out.extend_from_slice(f.data_ref().map_or(&[][..], |d| d)),
                Err(e) => return Err(*e.downcast::<Status>().unwrap()),
            }
        }
        Ok(out)
    }

    #[tokio::test]
    async fn messages_within_the_limit_pass_whole_however_the_bytes_are_cut() {
        let mut wire = prefix(3);
        wire.extend_from_slice(b"abc");
        wire.extend(prefix(0));
        wire.extend(prefix(8));
        wire.extend_from_slice(b"12345678");
        // Every way of cutting the bytes in two, and one byte at a time.
        for cut in 0..=wire.len() {
            let chunks = vec![wire[..cut].to_vec(), wire[cut..].to_vec()];
            assert_eq!(read_all(guarded(chunks, 8)).await.unwrap(), wire);
        }
        let bytes = wire.iter().map(|b| vec![*b]).collect();
        assert_eq!(read_all(guarded(bytes, 8)).await.unwrap(), wire);
    }

    #[tokio::test]
    async fn a_prefix_declaring_more_than_the_limit_ends_the_body_before_its_message() {
        let mut wire = prefix(2);
        wire.extend_from_slice(b"ok");
        wire.extend(prefix(4_000_000));
        // The prefix split across pieces, and no byte of the message sent.
        let chunks = vec![wire[..9].to_vec(), wire[9..].to_vec()];
        let refused = std::sync::Arc::new(AtomicBool::new(false));
        let seen = refused.clone();
        let stream = futures_util::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok::<_, hyper::Error>(Frame::data(Bytes::from(c)))),
        );
        let body = SizeGuarded::new(
            UnsyncBoxBody::new(http_body_util::StreamBody::new(stream)),
            65_536,
            move || seen.store(true, Ordering::Relaxed),
        );
        let status = read_all(body).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::OutOfRange);
        assert!(status.message().contains("4000000 bytes"), "{status:?}");
        assert!(status.message().contains("65536"), "{status:?}");
        assert!(refused.load(Ordering::Relaxed));
        // A message exactly at the limit passes.
        let mut exact = prefix(4);
        exact.extend_from_slice(b"abcd");
        let body = SizeGuarded::new(
            UnsyncBoxBody::new(Full::new(Bytes::from(exact.clone())).map_err(|n| match n {})),
            4,
            || {},
        );
        assert_eq!(read_all(body).await.unwrap(), exact);
    }
}
