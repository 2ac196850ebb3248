//! Long-form guides. Their examples are compiled and run as doc-tests.

pub mod axes_for_numpy_users;
pub mod generic_code;
