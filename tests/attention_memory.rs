//! Fused attention never holds the probabilities: the most host bytes held at once during one
//! causal attention call at context 1,024, forward and backward, stay below the size of one
//! Batch × Head × Query × Key buffer, where the composition it replaces holds several.
//!
//! A test binary of its own: the host's counters ([`Device::counters`]) count every tensor
//! of the process, so no other test may run beside this one.

use axes::autodiff::{self, Tape};
use axes::nn::causal_mask;
use axes::prelude::*;
use axes::{Attention, Error};

#[derive(Axis)]
struct B;
#[derive(Axis)]
struct H;
#[derive(Axis)]
struct Q;
#[derive(Axis)]
struct K;
#[derive(Axis)]
struct D;

const BATCH: usize = 2;
const HEADS: usize = 2;
const CONTEXT: usize = 1024;
const WIDTH: usize = 32;

/// The most host bytes held at once while `attend` runs one attention call forward and
/// backward on fresh operands, above the bytes held before it.
fn peak_bytes_of(
    attend: impl Fn(
        &autodiff::Var<f32, (B, H, Q, D)>,
        &autodiff::Var<f32, (B, H, K, D)>,
        &autodiff::Var<f32, (B, H, K, D)>,
    ) -> Result<autodiff::Var<f32, (B, H, Q, D)>, Error>,
) -> u64 {
    let q = Tensor::<f32, (B, H, Q, D)>::random_uniform(
        (B.len(BATCH), H.len(HEADS), Q.len(CONTEXT), D.len(WIDTH)),
        -1.0,
        1.0,
        1,
    )
    .unwrap();
    let [k, v] = [2, 3].map(|seed| {
        Tensor::<f32, (B, H, K, D)>::random_uniform(
            (B.len(BATCH), H.len(HEADS), K.len(CONTEXT), D.len(WIDTH)),
            -1.0,
            1.0,
            seed,
        )
        .unwrap()
    });
    let tape = Tape::new();
    let (q, k, v) = (tape.var(q), tape.var(k), tape.var(v));
    let before = Device::Cpu
        .counters()
        .expect("the host counts its bytes")
        .bytes;
    Device::Cpu.reset_peak();
    let out = attend(&q, &k, &v).unwrap();
    let grads = out.sum::<(B, H, Q, D)>().unwrap().backward().unwrap();
    let (dq, dk) = (grads.get(&q).unwrap(), grads.get(&k).unwrap());
    assert!((dq.to_vec().iter().chain(&dk.to_vec())).all(|g| g.is_finite()));
    let peak = Device::Cpu.counters().unwrap().peak_bytes;
    peak - before
}

#[test]
fn fused_attention_holds_less_than_one_probability_buffer() {
    let probabilities = (BATCH * HEADS * CONTEXT * CONTEXT * size_of::<f32>()) as u64;
    let scale = 1.0 / (WIDTH as f64).sqrt();
    let fused = peak_bytes_of(|q, k, v| {
        Attention::<Q, K, D>::causal()
            .with_scale(scale)
            .run_var(q, k, v)
    });
    let composed = peak_bytes_of(|q, k, v| {
        let tape = q.tape();
        let hide = tape.constant(causal_mask::<f32, Q, K>(Q.len(CONTEXT), K.len(CONTEXT))?);
        let scale = tape.constant(Tensor::<f32, ()>::from_vec((), vec![scale as f32])?);
        let scores = autodiff::dot_over::<(D,), _, _, _, _, _>(q, k)?;
        let p = (scores * &scale + &hide).eval()?.softmax::<K>()?;
        autodiff::dot_over::<(K,), _, _, _, _, _>(&p, v)
    });
    println!(
        "context {CONTEXT}, batch {BATCH} × {HEADS} heads × {WIDTH}: one probability buffer \
         {probabilities} bytes; peak above the operands: fused {fused}, composed {composed}"
    );
    // The measurement sees the buffers the composition holds.
    assert!(composed > 2 * probabilities, "composed {composed}");
    assert!(fused < probabilities, "fused {fused}");
}
