//! The fuzz target for `cairn_tests::fuzz::spill`, whose documentation says what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cairn_tests::fuzz::spill(data));
