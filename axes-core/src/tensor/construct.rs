//! Constructors: zeros, ones, full, from a `Vec`, from a function of the named index, random.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Tensor, reorder};
use crate::axis::{Axis, Dual, Len, PrimalAxis};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::list::{AxisList, AxisSet, MAX_RANK, SameAxes};
use crate::named::{Coords, NamedLengths};
use crate::storage::{self, HostVec, Storage};

/// Checked lengths in the order of `A`, with their element count.
pub(crate) struct Shape {
    lens: [usize; MAX_RANK],
    rank: usize,
    pub(crate) count: usize,
}

impl Shape {
    fn lens(&self) -> &[usize] {
        &self.lens[..self.rank]
    }
}

/// `Batch=2, Hidden=3` for messages.
pub(crate) fn describe_lengths<A: AxisList>(lens: &[usize]) -> String {
    A::names()
        .iter()
        .zip(lens)
        .map(|(name, len)| format!("{name}={len}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl<T: Element, A: AxisSet> Tensor<T, A> {
    /// Puts named lengths in `A`'s order and checks fixed lengths and the element count.
    pub(crate) fn shape<S>(lengths: &S) -> Result<Shape>
    where
        S: NamedLengths,
        S::Axes: SameAxes<A>,
    {
        Self::shape_in_order(reorder::<S::Axes, A>(lengths.values()))
    }

    /// Named lengths in `A`'s order, checked.
    pub(crate) fn checked_lens<S>(lengths: &S) -> Result<Vec<usize>>
    where
        S: NamedLengths,
        S::Axes: SameAxes<A>,
    {
        Ok(Self::shape(lengths)?.lens().to_vec())
    }

    /// Checks lengths given in `A`'s order.
    pub(crate) fn shape_in_order(lens: [usize; MAX_RANK]) -> Result<Shape> {
        let names = A::names();
        for ((&len, fixed), name) in lens.iter().zip(A::FIXED_LENS).zip(&names) {
            if let Some(fixed) = fixed
                && fixed != len
            {
                return Err(Error::FixedLength {
                    axis: name.to_string(),
                    fixed,
                    got: len,
                });
            }
        }
        let overflow = || Error::SizeOverflow {
            lengths: describe_lengths::<A>(&lens[..A::RANK]),
        };
        // Any zero length makes an empty tensor, however long the other axes are.
        let count = if lens[..A::RANK].contains(&0) {
            0
        } else {
            lens[..A::RANK]
                .iter()
                .try_fold(1usize, |n, &len| n.checked_mul(len))
                .ok_or_else(overflow)?
        };
        let bytes = count
            .checked_mul(size_of::<T>().max(1))
            .ok_or_else(overflow)?;
        if bytes > isize::MAX as usize {
            return Err(overflow());
        }
        Ok(Shape {
            lens,
            rank: A::RANK,
            count,
        })
    }

    pub(crate) fn row_major(shape: &Shape, data: HostVec<T>) -> Self {
        Self::new_unchecked(
            Storage::from_host_vec(data),
            Layout::row_major(shape.lens()),
        )
    }

    /// A tensor with every element `value`.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Hidden;
    /// let x = Tensor::<f32, (Batch, Hidden)>::full((Hidden.len(3), Batch.len(2)), 0.5)?;
    /// assert_eq!(x.lens(), &[2, 3]);
    /// assert!(x.to_vec().iter().all(|&v| v == 0.5));
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn full<S>(lengths: S, value: T) -> Result<Self>
    where
        S: NamedLengths,
        S::Axes: SameAxes<A>,
    {
        let shape = Self::shape(&lengths)?;
        Ok(Self::row_major(
            &shape,
            storage::filled(shape.count, value)?,
        ))
    }

    /// A tensor of zeros (`false` for bool).
    pub fn zeros<S>(lengths: S) -> Result<Self>
    where
        S: NamedLengths,
        S::Axes: SameAxes<A>,
    {
        Self::full(lengths, T::zero())
    }

    /// A tensor of ones (`true` for bool).
    pub fn ones<S>(lengths: S) -> Result<Self>
    where
        S: NamedLengths,
        S::Axes: SameAxes<A>,
    {
        Self::full(lengths, T::one())
    }

    /// A tensor over `data`, laid out row-major in the order the lengths are named (the last
    /// named axis varies fastest), whatever the order of `A`: the elements are not reordered.
    /// They are moved onto a cache line's boundary (one copy) unless `data` starts on one, as
    /// every buffer the library makes does: the CPU engine's vector loads and streaming stores
    /// run fastest there. ([`Tensor::from_parts`] with [`Storage::new`] keeps a `Vec` where it
    /// is.)
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Batch;
    /// #[derive(Axis)] struct Hidden;
    /// // data stored Hidden-major, viewed as (Batch, Hidden)
    /// let x = Tensor::<i32, (Batch, Hidden)>::from_vec((Hidden.len(2), Batch.len(3)), vec![1, 2, 3, 4, 5, 6])?;
    /// assert_eq!(x.get((Batch.at(0), Hidden.at(1)))?, 4);
    /// let err = Tensor::<i32, (Batch, Hidden)>::from_vec((Batch.len(2), Hidden.len(2)), vec![1, 2, 3]);
    /// assert_eq!(err.unwrap_err().to_string(),
    ///     "3 elements were given, but the lengths (Batch=2, Hidden=2) need 4");
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn from_vec<S>(lengths: S, data: Vec<T>) -> Result<Self>
    where
        S: NamedLengths,
        S::Axes: SameAxes<A>,
    {
        let shape = Self::shape(&lengths)?;
        if data.len() != shape.count {
            return Err(Error::ElementCount {
                lengths: describe_lengths::<A>(shape.lens()),
                expected: shape.count,
                got: data.len(),
            });
        }
        Ok(Self::row_major_in_written_order(
            &lengths,
            storage::on_boundary(data)?,
        ))
    }

    /// A tensor over `data` stored row-major in another order of `A`'s axes: `stored_lens`
    /// are the lengths in that order, and `from[i]` is the stored position of `A`'s axis `i`.
    /// Checks fixed lengths and the element count.
    pub(crate) fn from_stored_order(
        stored_lens: &[usize],
        from: &[usize],
        data: HostVec<T>,
    ) -> Result<Self> {
        let mut lens = [0; MAX_RANK];
        for (axis, &at) in from.iter().enumerate() {
            lens[axis] = stored_lens[at];
        }
        let shape = Self::shape_in_order(lens)?;
        if data.len() != shape.count {
            return Err(Error::ElementCount {
                lengths: describe_lengths::<A>(shape.lens()),
                expected: shape.count,
                got: data.len(),
            });
        }
        let layout = Layout::row_major(stored_lens).permuted(from);
        Ok(Self::new_unchecked(Storage::from_host_vec(data), layout))
    }

    /// Views `data`, row-major in the order the lengths are named, in `A`'s order.
    fn row_major_in_written_order<S>(lengths: &S, data: HostVec<T>) -> Self
    where
        S: NamedLengths,
        S::Axes: SameAxes<A>,
    {
        let written = <S::Axes as AxisList>::RANK;
        let layout = Layout::row_major(&lengths.values()[..written]);
        let from = <S::Axes as SameAxes<A>>::FROM;
        Self::new_unchecked(
            Storage::from_host_vec(data),
            layout.permuted(&from[..written]),
        )
    }

    /// A tensor whose element at each position is `f` of that position, read by axis name.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Row;
    /// #[derive(Axis)] struct Col;
    /// let eye = Tensor::<f64, (Row, Col)>::from_fn((Row.len(3), Col.len(3)), |ix| {
    ///     if ix.of::<Row>() == ix.of::<Col>() { 1.0 } else { 0.0 }
    /// })?;
    /// assert_eq!(eye.get((Row.at(1), Col.at(1)))?, 1.0);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn from_fn<S, F>(lengths: S, mut f: F) -> Result<Self>
    where
        S: NamedLengths,
        S::Axes: SameAxes<A>,
        F: FnMut(&Coords<A>) -> T,
    {
        let shape = Self::shape(&lengths)?;
        let mut data = storage::with_capacity(shape.count)?;
        let mut index = [0usize; MAX_RANK];
        for _ in 0..shape.count {
            data.push(f(&Coords::new(index)));
            for axis in (0..shape.rank).rev() {
                index[axis] += 1;
                if index[axis] < shape.lens[axis] {
                    break;
                }
                index[axis] = 0;
            }
        }
        Ok(Self::row_major(&shape, data))
    }

    /// A tensor of values drawn uniformly from `[low, high)` with a seeded generator
    /// (ChaCha8, so the same seed gives the same tensor on every machine). Values are drawn
    /// row-major in the order the lengths are named, so the value at each named index depends
    /// only on the seed and the lengths, not on the order of `A`. Integer and bool tensors
    /// draw whole values in `[low, high)`; float values may round to `high`.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Sample;
    /// let a = Tensor::<f32, (Sample,)>::random_uniform(Sample.len(100), -1.0, 1.0, 7)?;
    /// let b = Tensor::<f32, (Sample,)>::random_uniform(Sample.len(100), -1.0, 1.0, 7)?;
    /// assert_eq!(a, b);
    /// assert!(a.to_vec().iter().all(|v| (-1.0..=1.0).contains(v)));
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn random_uniform<S>(lengths: S, low: T, high: T, seed: u64) -> Result<Self>
    where
        S: NamedLengths,
        S::Axes: SameAxes<A>,
    {
        let (lo, hi) = (low.to_f64(), high.to_f64());
        // Also rejects NaN bounds.
        if lo.partial_cmp(&hi) != Some(std::cmp::Ordering::Less) {
            return Err(Error::InvalidRange {
                low: low.to_string(),
                high: high.to_string(),
            });
        }
        let shape = Self::shape(&lengths)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut data = storage::with_capacity(shape.count)?;
        data.extend((0..shape.count).map(|_| {
            let v = lo + rng.random::<f64>() * (hi - lo);
            T::from_f64(if T::IS_FLOAT { v } else { v.floor() })
        }));
        Ok(Self::row_major_in_written_order(&lengths, data))
    }

    /// A tensor of values drawn from the normal distribution with mean `mean` and standard
    /// deviation `std`, seeded like [`Tensor::random_uniform`].
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Sample;
    /// let x = Tensor::<f64, (Sample,)>::random_normal(Sample.len(10_000), 2.0, 0.5, 1)?;
    /// let mean = x.to_vec().iter().sum::<f64>() / 10_000.0;
    /// assert!((mean - 2.0).abs() < 0.05);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn random_normal<S>(lengths: S, mean: T, std: T, seed: u64) -> Result<Self>
    where
        T: crate::num::Float,
        S: NamedLengths,
        S::Axes: SameAxes<A>,
    {
        let (m, s) = (mean.to_f64(), std.to_f64());
        let normal = rand_distr::Normal::new(m, s).map_err(|_| Error::InvalidRange {
            low: format!("mean {mean}"),
            high: format!("std {std}"),
        })?;
        let shape = Self::shape(&lengths)?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut data = storage::with_capacity(shape.count)?;
        data.extend(
            (0..shape.count)
                .map(|_| T::from_f64(rand_distr::Distribution::sample(&normal, &mut rng))),
        );
        Ok(Self::row_major_in_written_order(&lengths, data))
    }
}

impl<T: Element, X: Axis> Tensor<T, (X,)>
where
    (X,): AxisSet,
{
    /// `0, 1, 2, ..., length - 1` along axis `X`.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Time;
    /// assert_eq!(Tensor::<f32, (Time,)>::arange(Time.len(4))?.to_vec(), [0., 1., 2., 3.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn arange(length: Len<X>) -> Result<Self> {
        Self::checked_shape(&[length.get()])?;
        Self::from_index_fn(&[length.get()], |ix| T::from_i64(ix[0] as i64))
    }
}

impl<T: Element, X: PrimalAxis> Tensor<T, (Dual<X>, X)>
where
    (Dual<X>, X): AxisSet,
{
    /// The identity over `(Dual<X>, X)`: one where the two indices are equal, else zero.
    /// `dot` with it leaves a tensor unchanged.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Hidden;
    /// let eye = Tensor::<f32, (Dual<Hidden>, Hidden)>::eye(Hidden.len(3))?;
    /// assert_eq!(eye.to_vec(), [1., 0., 0., 0., 1., 0., 0., 0., 1.]);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn eye(length: Len<X>) -> Result<Self> {
        let n = length.get();
        Self::checked_shape(&[n, n])?;
        Self::from_index_fn(
            &[n, n],
            |ix| {
                if ix[0] == ix[1] { T::one() } else { T::zero() }
            },
        )
    }
}
