//! `sluice_filters::fuzzing::resp_reply`: see there for what it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = sluice_filters::fuzzing::resp_reply(data) {
        panic!("resp_reply: {broken}");
    }
});
