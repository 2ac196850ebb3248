//! Layer and RMS normalisation along a named axis as fused jobs: the forward is two
//! reductions (the mean, then the variance about it, each one pass) and one element-wise pass
//! that writes the result; the backward is one pass for the four sums it needs (two along the
//! axis, the gain's and the bias's across it) and one element-wise pass for the input's
//! gradient, whose normalised input is recomputed from the statistics, never stored. In host
//! memory both run row by row instead ([`crate::engine::norm`]: one pass each).

use super::tape::{GradBuf, Var};
use crate::axis::Axis;
use crate::dispatch::{Input, Output, run_output, run_outputs, unpadded};
use crate::element::Element;
use crate::engine::norm::{self as rows, RowsOf, rows_layout};
use crate::error::{Error, Result};
use crate::ir::{BinaryOp, Ir, IrNode, ReduceOp, UnaryOp};
use crate::layout::Layout;
use crate::list::{AxisSet, HasAxis};
use crate::num::Float;
use crate::storage::{HostVec, Storage};
use crate::tensor::Tensor;

/// A buffer and its layout.
type Buf<T> = (Storage<T>, Layout);

/// `t`'s buffer and layout, written out first where `t` is padded.
fn parts<T: Float, B: AxisSet>(t: &Tensor<T, B>) -> Result<Buf<T>> {
    let t = unpadded(t)?;
    Ok((t.storage().clone(), *t.layout()))
}

/// What one normalisation is: along which axis of how many, centred or not, and its `eps`.
#[derive(Clone)]
struct Norm {
    /// The lengths of the input's axes.
    lens: Vec<usize>,
    /// The position of the normalised axis.
    axis: usize,
    /// The other axes' positions (the statistics' axes).
    others: Vec<usize>,
    /// Whether the mean is subtracted (layer norm) or not (RMS norm).
    centre: bool,
    eps: f64,
}

impl Norm {
    fn new(lens: &[usize], axis: usize, centre: bool, eps: f64) -> Self {
        Norm {
            lens: lens.to_vec(),
            axis,
            others: (0..lens.len()).filter(|&a| a != axis).collect(),
            centre,
            eps,
        }
    }

    fn rank(&self) -> usize {
        self.lens.len()
    }

    /// `1 / len` of the normalised axis.
    fn inverse_len(&self) -> f64 {
        1.0 / self.lens[self.axis] as f64
    }

    /// The mean (when centring) and the variance (mean square when not) along the axis.
    fn statistics<T: Float>(&self, x: &Buf<T>) -> Result<(Option<Buf<T>>, Buf<T>)> {
        let all: Vec<usize> = (0..self.rank()).collect();
        let x_in = || Input::new(&x.0, &x.1, &all, self.rank());
        let scaled = |ir: &mut Ir, node| {
            let k = ir.push(IrNode::Scalar(self.inverse_len()));
            ir.push(IrNode::Binary(BinaryOp::Mul, node, k))
        };
        let mean = if self.centre {
            let mut ir = Ir::default();
            let leaf = ir.leaf();
            let root = scaled(&mut ir, leaf);
            let output = Output::new(root, self.others.clone(), ReduceOp::Sum);
            Some(run_output(&ir, &self.lens, &[x_in()?], output)?)
        } else {
            None
        };
        let mut ir = Ir::default();
        let mut leaf = ir.leaf();
        let mut inputs = vec![x_in()?];
        if let Some(mean) = &mean {
            let m = ir.leaf();
            inputs.push(Input::new(&mean.0, &mean.1, &self.others, self.rank())?);
            leaf = ir.push(IrNode::Binary(BinaryOp::Sub, leaf, m));
        }
        let square = ir.push(IrNode::Binary(BinaryOp::Mul, leaf, leaf));
        let root = scaled(&mut ir, square);
        let output = Output::new(root, self.others.clone(), ReduceOp::Sum);
        let var = run_output(&ir, &self.lens, &inputs, output)?;
        Ok((mean, var))
    }

    /// Pushes onto `ir` leaves for the input and its statistics (run with [`Norm::inputs`]),
    /// then `x̂ = (x - mean) / √(var + eps)` and `1 / √(var + eps)`, whose nodes it returns.
    fn normalised(&self, ir: &mut Ir) -> (usize, usize) {
        let x = ir.leaf();
        let mean = self.centre.then(|| ir.leaf());
        let var = ir.leaf();
        let eps = ir.push(IrNode::Scalar(self.eps));
        let shifted = ir.push(IrNode::Binary(BinaryOp::Add, var, eps));
        let rstd = ir.push(IrNode::Unary(UnaryOp::Rsqrt, shifted));
        let centred = match mean {
            Some(m) => ir.push(IrNode::Binary(BinaryOp::Sub, x, m)),
            None => x,
        };
        let xhat = ir.push(IrNode::Binary(BinaryOp::Mul, centred, rstd));
        (xhat, rstd)
    }

    /// The inputs for the leaves of [`Norm::normalised`].
    fn inputs<'a, T: Float>(
        &self,
        x: &'a Buf<T>,
        mean: &'a Option<Buf<T>>,
        var: &'a Buf<T>,
    ) -> Result<Vec<Input<'a>>> {
        let all: Vec<usize> = (0..self.rank()).collect();
        let mut inputs = vec![Input::new(&x.0, &x.1, &all, self.rank())?];
        if let Some(mean) = mean {
            inputs.push(Input::new(&mean.0, &mean.1, &self.others, self.rank())?);
        }
        inputs.push(Input::new(&var.0, &var.1, &self.others, self.rank())?);
        Ok(inputs)
    }

    /// `x̂ · gain + bias` in one pass.
    fn forward<T: Float>(
        &self,
        x: &Buf<T>,
        mean: &Option<Buf<T>>,
        var: &Buf<T>,
        gain: Option<&Buf<T>>,
        bias: Option<&Buf<T>>,
    ) -> Result<Buf<T>> {
        let mut ir = Ir::default();
        let (mut root, _) = self.normalised(&mut ir);
        let mut inputs = self.inputs(x, mean, var)?;
        for (param, op) in [(gain, BinaryOp::Mul), (bias, BinaryOp::Add)] {
            if let Some(param) = param {
                let leaf = ir.leaf();
                inputs.push(Input::new(&param.0, &param.1, &[self.axis], self.rank())?);
                root = ir.push(IrNode::Binary(op, root, leaf));
            }
        }
        let all: Vec<usize> = (0..self.rank()).collect();
        run_output(
            &ir,
            &self.lens,
            &inputs,
            Output::new(root, all, ReduceOp::Sum),
        )
    }
}

/// The input (any axes `A`) normalised along `F`, then scaled by `gain` and shifted by `bias`
/// where given, on the tape: layer norm when `centre`, RMS norm when not.
pub(crate) fn normalised<T, A, F>(
    x: &Var<T, A>,
    gain: Option<&Var<T, (F,)>>,
    bias: Option<&Var<T, (F,)>>,
    centre: bool,
    eps: f64,
) -> Result<Var<T, A>>
where
    T: Float,
    A: AxisSet + HasAxis<F>,
    F: Axis,
{
    let tape = x.tape();
    if [gain, bias]
        .iter()
        .flatten()
        .any(|p| !p.tape().same_as(tape))
    {
        return Err(Error::Unsupported {
            what: "combining variables of different tapes".into(),
        });
    }
    let axis = <A as HasAxis<F>>::POS;
    let values = [gain, bias].map(|p| p.map(|p| p.value().storage()));
    if in_rows(x.value().storage(), x.value().lens(), &values) {
        return normalised_in_rows(x, gain, bias, rows::Norm { centre, eps });
    }
    let norm = Norm::new(x.value().lens(), axis, centre, eps);
    let xb = parts(x.value())?;
    let param = |p: Option<&Var<T, (F,)>>| p.map(|p| parts(p.value())).transpose();
    let (gb, bb) = (param(gain)?, param(bias)?);
    let (mean, var) = norm.statistics(&xb)?;
    let (storage, layout) = norm.forward(&xb, &mean, &var, gb.as_ref(), bb.as_ref())?;
    let value = Tensor::from_parts(storage, layout).expect("a job's result fits its layout");
    let needs = |p: Option<&Var<T, (F,)>>| p.filter(|p| p.needs_grad()).map(|p| p.id());
    let (x_id, gain_id, bias_id) = (x.needs_grad().then(|| x.id()), needs(gain), needs(bias));
    let needs_grad = x_id.is_some() || gain_id.is_some() || bias_id.is_some();
    Ok(tape.record(value, needs_grad, move |grads, at| {
        let Some(dy) = grads.tensor::<A>(at) else {
            return Ok(());
        };
        let dy = unpadded(&dy)?;
        let rank = norm.rank();
        let all: Vec<usize> = (0..rank).collect();
        // One pass: Σ_F dy·g and Σ_F dy·g·x̂ per position, Σ dy·x̂ and Σ dy per F.
        let mut ir = Ir::default();
        let (xhat, rstd) = norm.normalised(&mut ir);
        let mut inputs = norm.inputs(&xb, &mean, &var)?;
        let up = ir.leaf();
        inputs.push(Input::new(dy.storage(), dy.layout(), &all, rank)?);
        let scaled_up = match &gb {
            Some(g) => {
                let leaf = ir.leaf();
                inputs.push(Input::new(&g.0, &g.1, &[norm.axis], rank)?);
                ir.push(IrNode::Binary(BinaryOp::Mul, up, leaf))
            }
            None => up,
        };
        let weighted = ir.push(IrNode::Binary(BinaryOp::Mul, scaled_up, xhat));
        let up_xhat = ir.push(IrNode::Binary(BinaryOp::Mul, up, xhat));
        let along = |root| Output::<T>::new(root, norm.others.clone(), ReduceOp::Sum);
        let across = |root| Output::<T>::new(root, vec![norm.axis], ReduceOp::Sum);
        let mut outputs = vec![along(scaled_up), along(weighted)];
        if gain_id.is_some() {
            outputs.push(across(up_xhat));
        }
        if bias_id.is_some() {
            outputs.push(across(up));
        }
        let mut sums = run_outputs(&ir, &norm.lens, &inputs, outputs)?.into_iter();
        let (sum_up, sum_weighted) = (sums.next().expect("a sum"), sums.next().expect("a sum"));
        for id in [gain_id, bias_id].into_iter().flatten() {
            let (storage, layout) = sums.next().expect("a parameter's gradient");
            let grad = Tensor::<T, (F,)>::from_parts(storage, layout)
                .expect("a job's result fits its layout");
            grads.accumulate(id, grad)?;
        }
        let Some(x_id) = x_id else {
            return Ok(());
        };
        // dx = (dy·g - mean_F(dy·g) - x̂ · mean_F(dy·g·x̂)) / √(var + eps), the middle term
        // only when centring; added to x's gradient in the same pass.
        let (a, c) = (ir.leaf(), ir.leaf());
        inputs.push(Input::new(&sum_up.0, &sum_up.1, &norm.others, rank)?);
        inputs.push(Input::new(
            &sum_weighted.0,
            &sum_weighted.1,
            &norm.others,
            rank,
        )?);
        let k = ir.push(IrNode::Scalar(norm.inverse_len()));
        let mut inner = scaled_up;
        if norm.centre {
            let mean_up = ir.push(IrNode::Binary(BinaryOp::Mul, a, k));
            inner = ir.push(IrNode::Binary(BinaryOp::Sub, inner, mean_up));
        }
        let mean_weighted = ir.push(IrNode::Binary(BinaryOp::Mul, c, k));
        let along_xhat = ir.push(IrNode::Binary(BinaryOp::Mul, xhat, mean_weighted));
        inner = ir.push(IrNode::Binary(BinaryOp::Sub, inner, along_xhat));
        let dx = ir.push(IrNode::Binary(BinaryOp::Mul, inner, rstd));
        let output = Output::new(dx, all, ReduceOp::Sum).onto(grads.take_for_accumulate(x_id)?);
        let (storage, layout) = run_output(&ir, &norm.lens, &inputs, output)?;
        grads.put(x_id, GradBuf { storage, layout });
        Ok(())
    }))
}

/// [`normalised`] without a tape.
pub(crate) fn normalised_tensor<T, A, F>(
    x: &Tensor<T, A>,
    gain: Option<&Tensor<T, (F,)>>,
    bias: Option<&Tensor<T, (F,)>>,
    centre: bool,
    eps: f64,
) -> Result<Tensor<T, A>>
where
    T: Float,
    A: AxisSet + HasAxis<F>,
    F: Axis,
{
    let axis = <A as HasAxis<F>>::POS;
    if in_rows(
        x.storage(),
        x.lens(),
        &[gain, bias].map(|p| p.map(Tensor::storage)),
    ) {
        let norm = rows::Norm { centre, eps };
        return Ok(forward_in_rows(x, gain, bias, norm)?.value);
    }
    let norm = Norm::new(x.lens(), axis, centre, eps);
    let xb = parts(x)?;
    let (gb, bb) = (gain.map(parts).transpose()?, bias.map(parts).transpose()?);
    let (mean, var) = norm.statistics(&xb)?;
    let (storage, layout) = norm.forward(&xb, &mean, &var, gb.as_ref(), bb.as_ref())?;
    Ok(Tensor::from_parts(storage, layout).expect("a job's result fits its layout"))
}

/// Whether the row-by-row path runs: every tensor in host memory, and rows to run.
fn in_rows<T: Float>(x: &Storage<T>, lens: &[usize], params: &[Option<&Storage<T>>]) -> bool {
    let hosted = |s: &Storage<T>| s.device().is_host();
    hosted(x) && params.iter().flatten().all(|p| hosted(p)) && lens.iter().all(|&l| l > 0)
}

/// A parameter's elements in order, widened.
fn widened<T: Float, F: AxisSet>(p: &Tensor<T, F>) -> Result<Vec<T::Wide>> {
    let p = unpadded(p)?;
    let mut values = vec![T::Wide::zero(); p.lens()[0]];
    RowsOf::new(p.storage().host()?, p.layout(), 0).read(0, &mut values);
    Ok(values)
}

/// A tensor of `data` in `layout`.
fn in_layout<T: Float, B: AxisSet>(data: HostVec<T>, layout: &Layout) -> Result<Tensor<T, B>> {
    Ok(
        Tensor::from_parts(Storage::from_host_vec(data), *layout)
            .expect("a result fits its layout"),
    )
}

/// What the row-by-row forward gives: the result, and what its backward reads (the input
/// unpadded, the gain widened, the rows' statistics).
struct RowsForward<T: Float, A: AxisSet> {
    value: Tensor<T, A>,
    input: Tensor<T, A>,
    gain: Option<Vec<T::Wide>>,
    stats: rows::Statistics<T::Wide>,
}

/// The forward of [`normalised`] and [`normalised_tensor`] row by row in host memory.
fn forward_in_rows<T, A, F>(
    x: &Tensor<T, A>,
    gain: Option<&Tensor<T, (F,)>>,
    bias: Option<&Tensor<T, (F,)>>,
    norm: rows::Norm,
) -> Result<RowsForward<T, A>>
where
    T: Float,
    A: AxisSet + HasAxis<F>,
    F: Axis,
{
    let axis = <A as HasAxis<F>>::POS;
    let input = unpadded(x)?;
    let (gain, bias) = (
        gain.map(widened).transpose()?,
        bias.map(widened).transpose()?,
    );
    let (data, stats) = {
        let xr = RowsOf::new(input.storage().host()?, input.layout(), axis);
        norm.forward(&xr, gain.as_deref(), bias.as_deref())?
    };
    Ok(RowsForward {
        value: in_layout(data, &rows_layout(input.lens(), axis))?,
        input,
        gain,
        stats,
    })
}

/// [`normalised`] row by row in host memory.
fn normalised_in_rows<T, A, F>(
    x: &Var<T, A>,
    gain: Option<&Var<T, (F,)>>,
    bias: Option<&Var<T, (F,)>>,
    norm: rows::Norm,
) -> Result<Var<T, A>>
where
    T: Float,
    A: AxisSet + HasAxis<F>,
    F: Axis,
{
    let axis = <A as HasAxis<F>>::POS;
    let (gain_value, bias_value) = (gain.map(Var::value), bias.map(Var::value));
    let RowsForward {
        value,
        input,
        gain: gain_values,
        stats,
    } = forward_in_rows(x.value(), gain_value, bias_value, norm)?;
    let needs = |p: Option<&Var<T, (F,)>>| p.filter(|p| p.needs_grad()).map(|p| p.id());
    let (x_id, gain_id, bias_id) = (x.needs_grad().then(|| x.id()), needs(gain), needs(bias));
    let needs_grad = x_id.is_some() || gain_id.is_some() || bias_id.is_some();
    Ok(x.tape().record(value, needs_grad, move |grads, at| {
        let Some(dy) = grads.tensor::<A>(at) else {
            return Ok(());
        };
        let dy = unpadded(&dy)?;
        let sums = norm.backward(
            &RowsOf::new(input.storage().host()?, input.layout(), axis),
            &stats,
            gain_values.as_deref(),
            &RowsOf::new(dy.storage().host()?, dy.layout(), axis),
            x_id.is_some(),
        )?;
        for (id, total) in [(gain_id, sums.gain), (bias_id, sums.bias)] {
            if let Some(id) = id {
                let narrowed = total.iter().map(|&v| T::from_wide(v)).collect();
                let grad = in_layout::<T, (F,)>(narrowed, &Layout::row_major(&[total.len()]))?;
                grads.accumulate(id, grad)?;
            }
        }
        if let (Some(id), Some(dx)) = (x_id, sums.dx) {
            grads.accumulate(id, in_layout::<T, A>(dx, &rows_layout(input.lens(), axis))?)?;
        }
        Ok(())
    }))
}
