#![no_main]
//! `rollcall_controller::fuzzing::grpc_framing` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rollcall_controller::fuzzing::grpc_framing(data);
});
