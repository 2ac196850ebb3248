//! Running an expression into an existing tensor: `Tensor::assign`, `add_sum`,
//! `assign_sum`, `fill`; and [`sum_in`].

use super::reduce;
use crate::dispatch::{self, evaluate};
use crate::element::Element;
use crate::engine::exec::{Assign, Combine};
use crate::error::Result;
use crate::expr::{Cast, Expr, IntoExpr, Reduced, Reducible};
use crate::layout::Layout;
use crate::list::{AxisSet, SameAxes};
use crate::num::Num;
use crate::protocol::Device;
use crate::tensor::Tensor;

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// Evaluates `expr` into this tensor (a marshalling assignment: elements are converted
    /// to `T` with [`Element::cast`]). The expression's axes must be this tensor's, in any
    /// order; every length must match. Storage shared with other tensors is copied first
    /// (copy-on-write), so an expression that reads this tensor's own elements is computed
    /// from their old values.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let x = Tensor::<f32, (Row, Col)>::from_vec((Row.len(2), Col.len(2)), vec![1., 2., 3., 4.])?;
    /// let mut y = Tensor::<f64, (Col, Row)>::zeros((Row.len(2), Col.len(2)))?;
    /// y.assign(&x * 2.0)?;
    /// assert_eq!(y.to_vec(), [2., 6., 4., 8.]);
    /// // x + its transpose, into x itself
    /// let mut z = x.clone();
    /// z.assign(&x + x.axes_with_order::<(Col, Row)>().cast_axes::<(Row, Col)>()?)?;
    /// assert_eq!(z.to_vec(), [2., 5., 5., 8.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn assign<E: IntoExpr>(&mut self, expr: E) -> Result<()>
    where
        <E::Expr as Expr>::Axes: SameAxes<A>,
    {
        let expr: Cast<E::Expr, T> = Cast::new(expr.into_expr());
        self.run_into(&expr, Assign)
    }

    /// Adds `expr` summed over the axes `Over` to this tensor, in one pass with no
    /// temporary: the Cortex rule `db[Class] += dy[Batch, Class]` (elements are converted to
    /// `T`). The expression's axes other than `Over` must be this tensor's.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Class;
    /// let dy = Tensor::<f32, (Batch, Class)>::from_vec((Batch.len(2), Class.len(2)), vec![1., 2., 3., 4.])?;
    /// let mut db = Tensor::<f32, (Class,)>::ones(Class.len(2))?;
    /// db.add_sum::<(Batch,), _>(&dy)?;
    /// assert_eq!(db.to_vec(), [5., 7.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn add_sum<Over: AxisSet, E: IntoExpr>(&mut self, expr: E) -> Result<()>
    where
        T: Num,
        <E::Expr as Expr>::Axes: Reducible<Over>,
        Reduced<E::Expr, Over>: SameAxes<A>,
    {
        let expr: Cast<E::Expr, T> = Cast::new(expr.into_expr());
        dispatch::evaluate_into(&expr, self, Over::IDS, reduce::sum_sink())
    }

    /// Sets this tensor to `expr` summed over the axes `Over`, in one pass over the
    /// expression (see [`Tensor::add_sum`]); on a device, one job that writes the sums into
    /// this tensor's buffer.
    pub fn assign_sum<Over: AxisSet, E: IntoExpr>(&mut self, expr: E) -> Result<()>
    where
        T: Num,
        <E::Expr as Expr>::Axes: Reducible<Over>,
        Reduced<E::Expr, Over>: SameAxes<A>,
    {
        if self.device() != Device::Cpu {
            let expr: Cast<E::Expr, T> = Cast::new(expr.into_expr());
            return dispatch::evaluate_into(&expr, self, Over::IDS, Assign);
        }
        self.fill(T::zero())?;
        self.add_sum::<Over, E>(expr)
    }

    /// Sets every element to `value` (on the tensor's device).
    pub fn fill(&mut self, value: T) -> Result<()> {
        let storage = dispatch::filled(self.device(), self.element_count(), value)?;
        self.replace_parts(storage, Layout::row_major(self.lens()));
        Ok(())
    }

    /// Evaluates `expr` and combines it into this tensor with `sink`.
    pub(crate) fn run_into<E: Expr<Elem = T>, S: Combine<T>>(
        &mut self,
        expr: &E,
        sink: S,
    ) -> Result<()>
    where
        E::Axes: SameAxes<A>,
    {
        dispatch::evaluate_into(expr, self, &[], sink)
    }
}

/// `expr` summed over the axes `Over`, into a new tensor laid out in the axis order `O` (the
/// remaining axes in any order), in one pass.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] struct In;
/// #[derive(Axis)] struct Out;
/// let x = Tensor::<f32, (Batch, In)>::ones((Batch.len(2), In.len(3)))?;
/// let w = Tensor::<f32, (In, Out)>::ones((In.len(3), Out.len(4)))?;
/// let z: Tensor<f32, (Out, Batch)> = axes::eval::sum_in::<(Out, Batch), (In,), _>(&x * &w)?;
/// assert!(z.to_vec().iter().all(|&v| v == 3.0));
/// # Ok::<(), axes::Error>(())
/// ```
pub fn sum_in<O, Over, E>(expr: E) -> Result<Tensor<<E::Expr as Expr>::Elem, O>>
where
    O: AxisSet,
    Over: AxisSet,
    E: IntoExpr,
    <E::Expr as Expr>::Elem: Num,
    <E::Expr as Expr>::Axes: Reducible<Over>,
    Reduced<E::Expr, Over>: SameAxes<O>,
{
    evaluate(&expr.into_expr(), Over::IDS, reduce::sum_sink())
}
