//! `sluice_filters::fuzzing::resp_request`: see there for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = sluice_filters::fuzzing::resp_request(data) {
        panic!("resp_request: {broken}");
    }
});
