//! The generated protobuf and tonic code of `proto/rollcall/v1/roster.proto`. Nothing here is
//! hand-written but [`encoded::EncodedRosterUpdate`]; domain code converts at the edge
//! (`crate::edge`) and never passes these types around.

#![allow(clippy::all, clippy::pedantic, missing_docs)]

/// The protobuf codec of both servers and the client: prost's, with small buffers. tonic keeps
/// each stream's encode and decode buffers at their high-water mark for the life of the stream,
/// and a controller serves thousands of long-lived streams, so each starts at 2 KiB and an
/// outgoing stream hands its bytes to the transport once 2 KiB are pending (instead of 8 and
/// 32 KiB). With every message small (deltas, parts of 64 endpoints, about 3 KB) each message
/// then leaves as its own HTTP/2 DATA frame, so neither this encoder nor the peer's frame reader
/// and decoder ever hold more than about one message: under a 1,000-sidecar fleet an 8 KiB
/// threshold let each of them grow to 16–36 KiB per stream.
pub mod codec {
    use std::marker::PhantomData;

    use tonic::codec::{BufferSettings, Codec};
    use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

    const BUFFER: usize = 2 * 1024;
    const YIELD_AT: usize = 2 * 1024;

    #[derive(Debug, Clone, Default)]
    pub struct SmallBufferCodec<T, U>(PhantomData<(T, U)>);

    impl<T, U> Codec for SmallBufferCodec<T, U>
    where
        T: prost::Message + Send + 'static,
        U: prost::Message + Default + Send + 'static,
    {
        type Encode = T;
        type Decode = U;
        type Encoder = ProstEncoder<T>;
        type Decoder = ProstDecoder<U>;

        fn encoder(&mut self) -> Self::Encoder {
            ProstCodec::<T, U>::raw_encoder(BufferSettings::new(BUFFER, YIELD_AT))
        }

        fn decoder(&mut self) -> Self::Decoder {
            ProstCodec::<T, U>::raw_decoder(BufferSettings::new(BUFFER, YIELD_AT))
        }
    }
}

/// Package `rollcall.v1`.
pub mod v1 {
    tonic::include_proto!("rollcall.v1");
}

/// The `Roster` service as a server that streams pre-encoded roster updates, so one roster
/// version is encoded once however many sidecars watch it. Same service, same wire: a client
/// cannot tell it from [`v1::roster_server`].
pub mod encoded {
    use prost::bytes::{Buf, BufMut, Bytes};
    use prost::encoding::{DecodeContext, WireType};

    /// The generated server of the second build (`build.rs`).
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/encoded/rollcall.v1.rs"));
    }

    /// A `RosterUpdate` already in its wire form. Cloning shares the bytes.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct EncodedRosterUpdate(Bytes);

    impl EncodedRosterUpdate {
        pub fn new(update: &super::v1::RosterUpdate) -> Self {
            Self(Bytes::from(prost::Message::encode_to_vec(update)))
        }

        /// The encoded message.
        pub fn bytes(&self) -> &Bytes {
            &self.0
        }
    }

    /// Encoding writes the stored bytes as they are. Decoding is never needed (the server only
    /// sends these) and keeps nothing: every field is skipped.
    impl prost::Message for EncodedRosterUpdate {
        fn encode_raw(&self, buf: &mut impl BufMut) {
            buf.put_slice(&self.0);
        }

        fn merge_field(
            &mut self,
            tag: u32,
            wire_type: WireType,
            buf: &mut impl Buf,
            ctx: DecodeContext,
        ) -> Result<(), prost::DecodeError> {
            prost::encoding::skip_field(wire_type, tag, buf, ctx)
        }

        fn encoded_len(&self) -> usize {
            self.0.len()
        }

        fn clear(&mut self) {
            self.0 = Bytes::new();
        }
    }
}
