//! Compile-fail cases: each file in `ui-tests/` is one mistake, with the expected compiler
//! output beside it. Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --test ui`
//! after checking the new messages by eye.

#[test]
fn ui() {
    trybuild::TestCases::new().compile_fail("ui-tests/*.rs");
}
