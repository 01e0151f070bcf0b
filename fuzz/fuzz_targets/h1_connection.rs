#![no_main]
//! `rollcall_dataplane::h1::fuzzing::connection::connection` under libFuzzer: a whole connection
//! through a real fast-engine sidecar on 127.0.0.1, arbitrary bytes from the client and as the
//! endpoint's answer; a panic, a hang, or anything but well-formed requests at the endpoint is
//! a finding.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rollcall_dataplane::h1::fuzzing::connection::connection(data);
});
