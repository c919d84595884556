//! cargo-fuzz target `request_body`: see `fuzzing::request_body` for what it checks and its allocation bound.
#![no_main]

#[global_allocator]
static ALLOC: fuzzing::alloc::Counting = fuzzing::alloc::Counting;

libfuzzer_sys::fuzz_target!(
    init: assert!(fuzzing::alloc::installed(), "allocation bounds need the counting allocator"),
    |data: &[u8]| fuzzing::request_body(data)
);
