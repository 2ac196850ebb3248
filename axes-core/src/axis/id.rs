//! Type-level axis identities.
//!
//! Every derived axis carries a shallow id: sixteen hexadecimal digits of a 64-bit hash of its
//! crate, file, line, column and name and of its derive's place among the crate's derives
//! (the expansions of one `macro_rules!` body share their place in the source), written as a
//! type-level list of digit marker types.
//! Two ids are compared digit by digit and the comparison stops at the first digit that
//! differs, so comparing two distinct axes almost always costs the compiler one step.
//!
//! Two distinct axis types could still share an id (a 64-bit hash collision, as between two
//! crates, about one chance in 10^19 per pair). The type checker then takes them for one axis;
//! the computation, which matches axes by `TypeId`, does not, and every operation that
//! combines them returns [`Error::AxisIdCollision`](crate::Error::AxisIdCollision) (the
//! planner's iteration space and the contractions check for it), never a wrong result.
//!
//! The digits are sixteen distinct marker types (not typenum's unsigned integers): each has its
//! own type head, so rustc finds the one matching impl by its self type instead of trying a
//! long list of candidates. typenum supplies the type-level booleans ([`B0`], [`B1`]).

use typenum::{B0, B1, Bit};

/// End of a type-level id.
pub struct IdEnd;

/// One hexadecimal digit `D` followed by the rest `R` of a type-level id.
pub struct IdCons<D, R>(core::marker::PhantomData<(D, R)>);

/// The id of `Dual<A>`: distinct from every derived axis, equal only to the dual of an equal axis.
pub struct DualId<I>(core::marker::PhantomData<I>);

/// The id of a composite axis made of a list of axes (`Flat<..>`).
pub struct FlatId<L>(core::marker::PhantomData<L>);

/// Type-level equality of two ids, stopping at the first digit that differs.
pub trait IdEq<Other> {
    /// [`B1`] when the ids are equal, [`B0`] otherwise.
    type Out: Bit;
}

/// A type-level hexadecimal digit.
pub trait HexDigit {
    /// One bit per digit value: bit `k` is [`B1`] exactly when this digit is `k`.
    type OneHot: Select;
}

/// Picks the bit of a one-hot row that belongs to digit `k` (`At0` for digit 0, and so on).
#[allow(missing_docs)]
pub trait Select {
    type At0: Bit;
    type At1: Bit;
    type At2: Bit;
    type At3: Bit;
    type At4: Bit;
    type At5: Bit;
    type At6: Bit;
    type At7: Bit;
    type At8: Bit;
    type At9: Bit;
    type AtA: Bit;
    type AtB: Bit;
    type AtC: Bit;
    type AtD: Bit;
    type AtE: Bit;
    type AtF: Bit;
}

impl<
    X0: Bit,
    X1: Bit,
    X2: Bit,
    X3: Bit,
    X4: Bit,
    X5: Bit,
    X6: Bit,
    X7: Bit,
    X8: Bit,
    X9: Bit,
    XA: Bit,
    XB: Bit,
    XC: Bit,
    XD: Bit,
    XE: Bit,
    XF: Bit,
> Select
    for (
        X0,
        X1,
        X2,
        X3,
        X4,
        X5,
        X6,
        X7,
        X8,
        X9,
        XA,
        XB,
        XC,
        XD,
        XE,
        XF,
    )
{
    type At0 = X0;
    type At1 = X1;
    type At2 = X2;
    type At3 = X3;
    type At4 = X4;
    type At5 = X5;
    type At6 = X6;
    type At7 = X7;
    type At8 = X8;
    type At9 = X9;
    type AtA = XA;
    type AtB = XB;
    type AtC = XC;
    type AtD = XD;
    type AtE = XE;
    type AtF = XF;
}

/// Equality of two digits.
pub trait DigitEq<Other> {
    /// [`B1`] when the digits are equal.
    type Out: Bit;
}

macro_rules! hex_digits {
    ($($digit:ident $at:ident [$($bit:ident)*];)*) => {
        $(
            #[doc = concat!("The hexadecimal digit `", stringify!($digit), "` of a type-level id.")]
            pub struct $digit;

            impl HexDigit for $digit {
                type OneHot = ($($bit,)*);
            }

            impl<D: HexDigit> DigitEq<D> for $digit {
                type Out = <D::OneHot as Select>::$at;
            }
        )*
    };
}

hex_digits! {
    X0 At0 [B1 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0];
    X1 At1 [B0 B1 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0];
    X2 At2 [B0 B0 B1 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0];
    X3 At3 [B0 B0 B0 B1 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0];
    X4 At4 [B0 B0 B0 B0 B1 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0];
    X5 At5 [B0 B0 B0 B0 B0 B1 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0];
    X6 At6 [B0 B0 B0 B0 B0 B0 B1 B0 B0 B0 B0 B0 B0 B0 B0 B0];
    X7 At7 [B0 B0 B0 B0 B0 B0 B0 B1 B0 B0 B0 B0 B0 B0 B0 B0];
    X8 At8 [B0 B0 B0 B0 B0 B0 B0 B0 B1 B0 B0 B0 B0 B0 B0 B0];
    X9 At9 [B0 B0 B0 B0 B0 B0 B0 B0 B0 B1 B0 B0 B0 B0 B0 B0];
    XA AtA [B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B1 B0 B0 B0 B0 B0];
    XB AtB [B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B1 B0 B0 B0 B0];
    XC AtC [B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B1 B0 B0 B0];
    XD AtD [B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B1 B0 B0];
    XE AtE [B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B1 B0];
    XF AtF [B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B0 B1];
}

/// After comparing one digit: stop with "unequal" at [`B0`], compare the rest at [`B1`].
pub trait ThenCompare<R, S> {
    /// The result of the whole comparison.
    type Out: Bit;
}

impl<R, S> ThenCompare<R, S> for B0 {
    type Out = B0;
}

impl<R: IdEq<S>, S> ThenCompare<R, S> for B1 {
    type Out = <R as IdEq<S>>::Out;
}

impl IdEq<IdEnd> for IdEnd {
    type Out = B1;
}

impl<D, R, E, S> IdEq<IdCons<E, S>> for IdCons<D, R>
where
    D: DigitEq<E>,
    <D as DigitEq<E>>::Out: ThenCompare<R, S>,
{
    type Out = <<D as DigitEq<E>>::Out as ThenCompare<R, S>>::Out;
}

impl<I: IdEq<J>, J> IdEq<DualId<J>> for DualId<I> {
    type Out = <I as IdEq<J>>::Out;
}

impl<I, D, R> IdEq<IdCons<D, R>> for DualId<I> {
    type Out = B0;
}

impl<I, D, R> IdEq<DualId<I>> for IdCons<D, R> {
    type Out = B0;
}

impl<L: IdListEq<M>, M> IdEq<FlatId<M>> for FlatId<L> {
    type Out = <L as IdListEq<M>>::Out;
}

impl<L, D, R> IdEq<IdCons<D, R>> for FlatId<L> {
    type Out = B0;
}

impl<L, D, R> IdEq<FlatId<L>> for IdCons<D, R> {
    type Out = B0;
}

impl<L, I> IdEq<DualId<I>> for FlatId<L> {
    type Out = B0;
}

impl<L, I> IdEq<FlatId<L>> for DualId<I> {
    type Out = B0;
}

/// Element-by-element equality of two lists of ids (the parts of a composite axis).
pub trait IdListEq<Other> {
    /// [`B1`] when both lists hold equal ids in the same order.
    type Out: Bit;
}

impl IdListEq<()> for () {
    type Out = B1;
}

impl<H, T> IdListEq<()> for (H, T) {
    type Out = B0;
}

impl<H, T> IdListEq<(H, T)> for () {
    type Out = B0;
}

impl<H, T, G, U> IdListEq<(G, U)> for (H, T)
where
    H: IdEq<G>,
    <H as IdEq<G>>::Out: ThenCompareList<T, U>,
{
    type Out = <<H as IdEq<G>>::Out as ThenCompareList<T, U>>::Out;
}

/// [`ThenCompare`] for lists of ids.
pub trait ThenCompareList<T, U> {
    /// The result of the whole comparison.
    type Out: Bit;
}

impl<T, U> ThenCompareList<T, U> for B0 {
    type Out = B0;
}

impl<T: IdListEq<U>, U> ThenCompareList<T, U> for B1 {
    type Out = <T as IdListEq<U>>::Out;
}
