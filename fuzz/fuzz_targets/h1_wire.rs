#![no_main]
//! `rollcall_dataplane::h1::fuzzing::wire` under libFuzzer: the fast HTTP/1 codec and hyper's
//! on the same bytes, from a client or from an endpoint; a difference is a finding.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rollcall_dataplane::h1::fuzzing::wire(data);
});
