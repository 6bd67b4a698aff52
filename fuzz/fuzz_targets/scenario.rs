//! `sluice_workload::fuzzing::scenario`: see there for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = sluice_workload::fuzzing::scenario(data) {
        panic!("scenario: {broken}");
    }
});
