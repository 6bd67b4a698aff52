//! `sluice_filters::fuzzing::head_scan`: see there for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = sluice_filters::fuzzing::head_scan(data) {
        panic!("head_scan: {broken}");
    }
});
