//! Compiles the roster protocol with protox (a pure-Rust protobuf compiler), so building needs
//! no system `protoc`. Twice: once for the messages, the client and the usual server; once more
//! for a server only whose `Watch` streams `RosterUpdate`s already encoded (the controller
//! encodes each roster version once and sends the same bytes to every sidecar). The second
//! build borrows every message from the first, so there is one set of types.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["rollcall/v1/roster.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .codec_path("crate::proto::codec::SmallBufferCodec")
        // Rare beside the roster it rides with: boxed, so every update is not sized for it.
        .boxed(".rollcall.v1.RosterUpdate.fleet")
        .compile_fds(fds.clone())?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("encoded");
    std::fs::create_dir_all(&out)?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(false)
        .codec_path("crate::proto::codec::SmallBufferCodec")
        .out_dir(&out)
        .extern_path(".rollcall.v1", "crate::proto::v1")
        .extern_path(
            ".rollcall.v1.RosterUpdate",
            "crate::proto::encoded::EncodedRosterUpdate",
        )
        .compile_fds(fds)?;
    Ok(())
}
