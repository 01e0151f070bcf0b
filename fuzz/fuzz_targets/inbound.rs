#![no_main]
//! `rollcall_api::fuzzing::inbound` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rollcall_api::fuzzing::inbound(data);
});
