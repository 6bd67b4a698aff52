//! `sluice_filters::fuzzing::fault_headers`: see there for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = sluice_filters::fuzzing::fault_headers(data) {
        panic!("fault_headers: {broken}");
    }
});
