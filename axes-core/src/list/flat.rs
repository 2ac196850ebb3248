//! `Flat<L>`: one axis made of the axes of `L`, as `flatten` produces.

use std::borrow::Cow;
use std::marker::PhantomData;

use super::{AxisSet, Cons, MAX_RANK, Nil};
use crate::axis::id::{FlatId, IdListEq};
use crate::axis::{Axis, Dual, PrimalAxis};

/// The composite axis made of the axes `L` in order (the last varying fastest), as
/// `Tensor::flatten::<L>()` produces; `unflatten` splits it back.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::list::Flat;
/// #[derive(Axis)] struct C;
/// #[derive(Axis)] #[axis(len = 4)] struct H;
/// assert_eq!(<Flat<(C, H)>>::name(), "Flat<(C, H)>");
/// assert_eq!(<Flat<(C, H)>>::FIXED_LEN, None);
/// ```
pub struct Flat<L>(PhantomData<fn() -> L>);

/// The ids of the axes of an internal list, as a nested tuple.
pub trait ListIds {
    /// `(Id0, (Id1, ..., ()))`, equal to itself (as every axis id is).
    type Ids: IdListEq<Self::Ids, Out = typenum::B1>;
}

impl ListIds for Nil {
    type Ids = ();
}

impl<H: Axis, T: ListIds> ListIds for Cons<H, T> {
    type Ids = (H::Id, T::Ids);
}

const fn product_if_all_fixed(lens: [Option<usize>; MAX_RANK], rank: usize) -> Option<usize> {
    let mut product = 1usize;
    let mut i = 0;
    while i < rank {
        match lens[i] {
            Some(len) => product *= len,
            None => return None,
        }
        i += 1;
    }
    Some(product)
}

impl<L: AxisSet> Axis for Flat<L>
where
    L::List: ListIds,
{
    type Id = FlatId<<L::List as ListIds>::Ids>;
    type Transposed = Dual<Flat<L>>;
    type Roles = crate::axis::roles::NoRoles;
    const FIXED_LEN: Option<usize> = product_if_all_fixed(L::FIXED_LENS, L::RANK);
    fn name() -> Cow<'static, str> {
        Cow::Owned(format!("Flat<({})>", L::names().join(", ")))
    }
}

impl<L: AxisSet> PrimalAxis for Flat<L> where L::List: ListIds {}
