// `Expr` is sealed: its hidden methods belong to the CPU engine, so only the library's own
// nodes, scalars and tensors are expressions.
use axes::prelude::*;

struct Mine;

impl Expr for Mine {}

fn main() {}
