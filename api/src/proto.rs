//! The generated protobuf and tonic code of `proto/rollcall/v1/roster.proto`. Nothing here is
//! hand-written but [`encoded::EncodedRosterUpdate`]; domain code converts at the edge
//! (`crate::edge`) and never passes these types around.

#![allow(clippy::all, clippy::pedantic, missing_docs)]

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
