//! `sluice_control::fuzzing::config`: see there for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = sluice_control::fuzzing::config(data) {
        panic!("config: {broken}");
    }
});
