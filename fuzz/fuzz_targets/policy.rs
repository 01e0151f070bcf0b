#![no_main]
//! `rollcall_api::fuzzing::policy` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rollcall_api::fuzzing::policy(data);
});
