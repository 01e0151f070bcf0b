#![no_main]
//! `rollcall_dataplane::fuzzing::config_file` under libFuzzer.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rollcall_dataplane::fuzzing::config_file(data);
});
