//! `sluice_filters::fuzzing::meter`: see there for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = sluice_filters::fuzzing::meter(data) {
        panic!("meter: {broken}");
    }
});
