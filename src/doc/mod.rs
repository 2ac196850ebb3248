//! Long-form guides. Their examples are compiled and run as doc-tests.

pub mod adding_an_op;
pub mod axes_for_numpy_users;
pub mod generic_code;
pub mod semantics;
