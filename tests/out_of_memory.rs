//! A request for more memory than the host can give is `Error::OutOfMemory`, naming the
//! device and the bytes, never an abort. Each case asks for 2^45 f32 (128 TiB: beyond a
//! 47-bit address space, refused under any overcommit policy) and, where the kernel refuses
//! what it cannot back (Linux's default heuristic or strict overcommit), 2^40 f32 (4 TiB).
//! Refused requests fail at once, so these tests take no memory and no time.

use axes::nn::minibatches;
use axes::prelude::*;
use axes::{Error, Result};

#[derive(Axis)]
struct Big;
#[derive(Axis)]
struct Row;
#[derive(Axis)]
struct Col;
#[derive(Axis)]
struct Inner;

/// Element counts that no allocation can serve here.
fn huge_counts() -> Vec<usize> {
    let policy = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
    let refuses_4_tib = matches!(policy.trim(), "0" | "2");
    let mut counts = vec![1usize << 45];
    if refuses_4_tib {
        counts.insert(0, 1 << 40);
    }
    counts
}

/// Checks that `result` is `OutOfMemory` on the CPU for at least `bytes` bytes.
fn assert_out_of_memory<T>(what: &str, bytes: usize, result: Result<T>) {
    match result {
        Err(Error::OutOfMemory {
            device, requested, ..
        }) => {
            assert_eq!(device, "cpu", "{what}");
            assert!(requested >= bytes as u64, "{what}: {requested} < {bytes}");
        }
        Err(other) => panic!("{what}: expected OutOfMemory, got {other}"),
        Ok(_) => panic!("{what}: {bytes} bytes were allocated"),
    }
}

#[test]
fn constructors_report_out_of_memory() {
    for n in huge_counts() {
        let bytes = n * 4;
        let big = Big.len(n);
        assert_out_of_memory("zeros", bytes, Tensor::<f32, (Big,)>::zeros(big));
        assert_out_of_memory("full", bytes, Tensor::<f32, (Big,)>::full(big, 2.5));
        assert_out_of_memory(
            "from_fn",
            bytes,
            Tensor::<f32, (Big,)>::from_fn(big, |_| unreachable!("no room to write")),
        );
        assert_out_of_memory(
            "random_normal",
            bytes,
            Tensor::<f32, (Big,)>::random_normal(big, 0.0, 1.0, 7),
        );
        assert_out_of_memory(
            "random_uniform",
            bytes,
            Tensor::<f32, (Big,)>::random_uniform(big, 0.0, 1.0, 7),
        );
        assert_out_of_memory("arange", bytes, Tensor::<f32, (Big,)>::arange(Len::new(n)));
        assert_out_of_memory("minibatches", n * 8, minibatches::<Big>(n, 32, 0));
    }
}

#[test]
fn results_of_huge_size_report_out_of_memory() -> Result<()> {
    for n in huge_counts() {
        let bytes = n * 4;
        let (rows, cols) = (1 << 20, n >> 20);
        let a = Tensor::<f32, (Row,)>::full(Row.len(rows), 1.0)?;
        let b = Tensor::<f32, (Col,)>::full(Col.len(cols), 2.0)?;
        // An implicit outer broadcast: the sum has both axes.
        let sum: Result<Tensor<f32, (Row, Col)>> = (&a + &b).eval();
        assert_out_of_memory("a + b over (Row, Col)", bytes, sum);
        // A product whose result is huge.
        let x = Tensor::<f32, (Row, Inner)>::full((Row.len(rows), Inner.len(1)), 1.0)?;
        let y = Tensor::<f32, (Inner, Col)>::full((Inner.len(1), Col.len(cols)), 1.0)?;
        let product: Result<Tensor<f32, (Row, Col)>> = dot(&x, &y);
        assert_out_of_memory("dot", bytes, product);
        // A broadcast view costs nothing; writing it out does.
        let view = a.broadcast::<(Row, Col)>(Col.len(cols))?;
        assert_out_of_memory("contiguous", bytes, view.contiguous());
        assert_out_of_memory("to_layout", bytes, view.to_layout::<(Col, Row)>());
        assert_out_of_memory("a sum of the view", bytes, (&view * 2.0).eval());
    }
    Ok(())
}

#[test]
fn the_message_names_the_device_and_the_sizes() {
    let error = Tensor::<f32, (Big,)>::zeros(Big.len(1 << 45)).unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with("out of memory on cpu: 140737488355328 bytes (128.0 TiB) requested"),
        "{message}"
    );
    if std::path::Path::new("/proc/meminfo").exists() {
        assert!(message.contains("available"), "{message}");
    }
}
