#![no_main]
//! `rollcall_controller::fuzzing::report` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rollcall_controller::fuzzing::report(data);
});
