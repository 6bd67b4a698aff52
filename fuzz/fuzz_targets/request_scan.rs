//! `sluice_filters::fuzzing::request_scan`: see there for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = sluice_filters::fuzzing::request_scan(data) {
        panic!("request_scan: {broken}");
    }
});
