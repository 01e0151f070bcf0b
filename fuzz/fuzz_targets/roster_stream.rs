#![no_main]
//! `rollcall_dataplane::fuzzing::roster_stream` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rollcall_dataplane::fuzzing::roster_stream(data);
});
