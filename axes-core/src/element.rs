//! Element types: f32, f64, f16, bf16, i32, i64, u8 and bool.

use std::fmt::{Debug, Display};

use half::{bf16, f16};

use crate::halves::Half;

/// The element types a tensor can hold, as a run-time value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// `half::f16`
    F16,
    /// `half::bf16`
    BF16,
    /// `i32`
    I32,
    /// `i64`
    I64,
    /// `u8`
    U8,
    /// `bool`
    Bool,
}

impl DType {
    /// The size of one element in bytes.
    pub const fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::U8 | DType::Bool => 1,
        }
    }

    /// The Rust name of the type.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }
}

/// `$body` with `$T` the element type `$dtype` names: the one `match` over the run-time type,
/// then code generic over [`Element`].
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::element::with_dtype!(@ $dtype, $T, $body; F32 f32, F64 f64, F16 half::f16, BF16 half::bf16,
            I32 i32, I64 i64, U8 u8, Bool bool)
    };
    (@ $dtype:expr, $T:ident, $body:expr; $($variant:ident $t:ty),*) => {
        match $dtype {
            $($crate::element::DType::$variant => {
                type $T = $t;
                $body
            })*
        }
    };
}
pub(crate) use with_dtype;

/// `$body` with `$v` bound to the slice of whichever type `$elements` holds.
macro_rules! with_elements {
    ($elements:expr, $v:ident => $body:expr) => {
        match $elements {
            $crate::element::Elements::F32($v) => $body,
            $crate::element::Elements::F64($v) => $body,
            $crate::element::Elements::F16($v) => $body,
            $crate::element::Elements::BF16($v) => $body,
            $crate::element::Elements::I32($v) => $body,
            $crate::element::Elements::I64($v) => $body,
            $crate::element::Elements::U8($v) => $body,
            $crate::element::Elements::Bool($v) => $body,
        }
    };
}
pub(crate) use with_elements;

/// The element type of a slice of `T`, as a run-time value.
pub(crate) fn dtype_of<T: Element>(_: &[T]) -> DType {
    T::DTYPE
}

/// One variant per element type, each holding `$slice` of that type.
macro_rules! per_dtype {
    ($(#[$doc:meta])* $name:ident, $($slice:tt)*) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub enum $name<'a> {
            /// `f32`
            F32($($slice)* [f32]),
            /// `f64`
            F64($($slice)* [f64]),
            /// `half::f16`
            F16($($slice)* [f16]),
            /// `half::bf16`
            BF16($($slice)* [bf16]),
            /// `i32`
            I32($($slice)* [i32]),
            /// `i64`
            I64($($slice)* [i64]),
            /// `u8`
            U8($($slice)* [u8]),
            /// `bool`
            Bool($($slice)* [bool]),
        }
    };
}

per_dtype!(
    /// A slice of elements whose type is known at run time: how code that serves every
    /// element type with one `match` per call (the CPU's IR interpreter) reads memory.
    Elements, &'a
);
per_dtype!(
    /// A mutable slice of elements whose type is known at run time (see [`Elements`]).
    ElementsMut, &'a mut
);

impl Clone for Elements<'_> {
    fn clone(&self) -> Self {
        *self
    }
}
impl Copy for Elements<'_> {}

impl Elements<'_> {
    /// The element type.
    pub fn dtype(&self) -> DType {
        with_elements!(*self, s => dtype_of(s))
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        with_elements!(self, s => s.len())
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a> Elements<'a> {
    /// The elements `from..to` (panics outside the slice, as slice indexing).
    #[inline(always)]
    pub fn slice(self, from: usize, to: usize) -> Elements<'a> {
        macro_rules! sliced {
            ($($variant:ident),*) => {
                match self {
                    $(Elements::$variant(s) => Elements::$variant(&s[from..to]),)*
                }
            };
        }
        sliced!(F32, F64, F16, BF16, I32, I64, U8, Bool)
    }
}

impl ElementsMut<'_> {
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.as_ref().dtype()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.as_ref().len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A shared view of the same elements.
    pub fn as_ref(&self) -> Elements<'_> {
        match self {
            ElementsMut::F32(s) => Elements::F32(s),
            ElementsMut::F64(s) => Elements::F64(s),
            ElementsMut::F16(s) => Elements::F16(s),
            ElementsMut::BF16(s) => Elements::BF16(s),
            ElementsMut::I32(s) => Elements::I32(s),
            ElementsMut::I64(s) => Elements::I64(s),
            ElementsMut::U8(s) => Elements::U8(s),
            ElementsMut::Bool(s) => Elements::Bool(s),
        }
    }

    /// The same elements, borrowed again for a shorter time.
    pub fn reborrow(&mut self) -> ElementsMut<'_> {
        match self {
            ElementsMut::F32(s) => ElementsMut::F32(s),
            ElementsMut::F64(s) => ElementsMut::F64(s),
            ElementsMut::F16(s) => ElementsMut::F16(s),
            ElementsMut::BF16(s) => ElementsMut::BF16(s),
            ElementsMut::I32(s) => ElementsMut::I32(s),
            ElementsMut::I64(s) => ElementsMut::I64(s),
            ElementsMut::U8(s) => ElementsMut::U8(s),
            ElementsMut::Bool(s) => ElementsMut::Bool(s),
        }
    }
}

impl<'a> ElementsMut<'a> {
    /// The elements before `mid` and those from it (panics if `mid` is past the end, as
    /// [`slice::split_at_mut`]).
    pub fn split_at(self, mid: usize) -> (ElementsMut<'a>, ElementsMut<'a>) {
        macro_rules! split {
            ($($variant:ident),*) => {
                match self {
                    $(ElementsMut::$variant(s) => {
                        let (a, b) = s.split_at_mut(mid);
                        (ElementsMut::$variant(a), ElementsMut::$variant(b))
                    })*
                }
            };
        }
        split!(F32, F64, F16, BF16, I32, I64, U8, Bool)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A type a tensor can hold.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::Element;
/// assert_eq!(<half::f16 as Element>::from_f64(1.5).to_f64(), 1.5);
/// assert_eq!(<u8 as Element>::DTYPE.name(), "u8");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tensor element type",
    label = "not an element type",
    note = "tensors hold f32, f64, half::f16, half::bf16, i32, i64, u8 or bool"
)]
pub trait Element:
    Copy + PartialEq + PartialOrd + Debug + Display + Default + Send + Sync + 'static + sealed::Sealed
{
    /// The run-time tag of this type.
    const DTYPE: DType;
    /// Whether the type is a floating-point type.
    const IS_FLOAT: bool;
    /// Zero (`false` for bool).
    fn zero() -> Self;
    /// One (`true` for bool).
    fn one() -> Self;
    /// The value as an `f64` (`true` is 1).
    fn to_f64(self) -> f64;
    /// The nearest value to `v` (integers truncate toward zero and saturate; bool is `v != 0`).
    fn from_f64(v: f64) -> Self;
    /// The value as an `i64` (floats truncate toward zero and saturate; `true` is 1).
    fn to_i64(self) -> i64;
    /// `v` converted (integers wrap like `as`; bool is `v != 0`).
    fn from_i64(v: i64) -> Self;

    /// The slice, with its element type as a run-time value.
    fn elements(data: &[Self]) -> Elements<'_>;
    /// The mutable slice, with its element type as a run-time value.
    fn elements_mut(data: &mut [Self]) -> ElementsMut<'_>;

    /// This value converted to another element type: exactly between integer types (with
    /// `as` wrapping), through `f64` where a float is involved (rounding to nearest, floats
    /// to integers truncating toward zero and saturating, NaN giving 0: Rust's `as`). This is
    /// the conversion of a marshalling assignment.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::Element;
    /// assert_eq!(2.7f32.cast::<i32>(), 2);
    /// assert_eq!(1e10f64.cast::<i32>(), i32::MAX);
    /// assert_eq!((-1e10f64).cast::<u8>(), 0);
    /// assert_eq!(f32::NAN.cast::<i64>(), 0);
    /// assert_eq!(i64::MAX.cast::<i64>(), i64::MAX);
    /// assert_eq!(300i32.cast::<u8>(), 44);
    /// assert!(3u8.cast::<bool>());
    /// ```
    #[inline(always)]
    fn cast<U: Element>(self) -> U {
        if Self::IS_FLOAT || U::IS_FLOAT {
            U::from_f64(self.to_f64())
        } else {
            U::from_i64(self.to_i64())
        }
    }
}

macro_rules! primitive_elements {
    ($($t:ty => $dtype:ident, $float:literal);*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            const IS_FLOAT: bool = $float;
            fn zero() -> Self { 0 as $t }
            fn one() -> Self { 1 as $t }
            fn to_f64(self) -> f64 { self as f64 }
            fn from_f64(v: f64) -> Self { v as $t }
            fn to_i64(self) -> i64 { self as i64 }
            fn from_i64(v: i64) -> Self { v as $t }
            fn elements(data: &[Self]) -> Elements<'_> { Elements::$dtype(data) }
            fn elements_mut(data: &mut [Self]) -> ElementsMut<'_> { ElementsMut::$dtype(data) }
        }
    )*};
}

primitive_elements!(f32 => F32, true; f64 => F64, true; i32 => I32, false; i64 => I64, false; u8 => U8, false);

macro_rules! half_elements {
    ($($t:ty => $dtype:ident);*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$dtype;
            const IS_FLOAT: bool = true;
            fn zero() -> Self { <$t>::ZERO }
            fn one() -> Self { <$t>::ONE }
            fn to_f64(self) -> f64 { f64::from(self.widen()) }
            fn from_f64(v: f64) -> Self { nearest(v) }
            fn to_i64(self) -> i64 { self.widen() as i64 }
            fn from_i64(v: i64) -> Self { nearest(v as f64) }
            fn elements(data: &[Self]) -> Elements<'_> { Elements::$dtype(data) }
            fn elements_mut(data: &mut [Self]) -> ElementsMut<'_> { ElementsMut::$dtype(data) }
        }
    )*};
}

half_elements!(f16 => F16; bf16 => BF16);

/// A half type's value nearest `v` (ties to even): through f32 rounded to odd — toward zero,
/// with its last bit set where that dropped anything — so that the second rounding sees
/// what the first dropped (rounding to nearest twice is off where the first lands on a tie:
/// half's own `bf16::from_f64` is, in about one f32 value in 20,000).
fn nearest<H: Half>(v: f64) -> H {
    let rounded = v as f32;
    if v.is_nan() || f64::from(rounded) == v {
        return H::narrow(rounded);
    }
    let mut bits = rounded.to_bits();
    if f64::from(rounded).abs() > v.abs() {
        bits -= 1; // toward zero: one step down in magnitude
    }
    H::narrow(f32::from_bits(bits | 1))
}

/// `from` widened to f32 into `to` (as long): f16 and bf16 many at a time (half's slice
/// conversions, vectorised where the CPU can), other types one by one through f64.
pub(crate) fn widen_to_f32<T: Element>(from: &[T], to: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    match T::elements(from) {
        Elements::F16(from) => from.convert_to_f32_slice(to),
        Elements::BF16(from) => from.convert_to_f32_slice(to),
        _ => {
            for (t, &f) in to.iter_mut().zip(from) {
                *t = f.to_f64() as f32;
            }
        }
    }
}

/// `from` rounded to `T` into `to` (as long): to the nearest, ties to even — as the same
/// value through f64, which holds every f32 exactly — f16 and bf16 many at a time.
pub(crate) fn narrow_from_f32<T: Element>(from: &[f32], to: &mut [T]) {
    use half::slice::HalfFloatSliceExt;
    match T::elements_mut(to) {
        ElementsMut::F16(to) => to.convert_from_f32_slice(from),
        ElementsMut::BF16(to) => to.convert_from_f32_slice(from),
        _ => {
            for (t, &f) in to.iter_mut().zip(from) {
                *t = T::from_f64(f64::from(f));
            }
        }
    }
}

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    const IS_FLOAT: bool = false;
    fn zero() -> Self {
        false
    }
    fn one() -> Self {
        true
    }
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self))
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn to_i64(self) -> i64 {
        i64::from(self)
    }
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn elements(data: &[Self]) -> Elements<'_> {
        Elements::Bool(data)
    }
    fn elements_mut(data: &mut [Self]) -> ElementsMut<'_> {
        ElementsMut::Bool(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f64 to a half type rounds once, to the nearest (ties to even): for every f32 input as
    /// f32 itself rounds it, and where rounding to f32 first would land on a tie.
    #[test]
    fn halves_round_f64_to_nearest() {
        let mut state = 0x9e37_79b9_u32;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let v = f32::from_bits(state);
            if v.is_nan() {
                continue;
            }
            let (b, h) = (
                <bf16 as Element>::from_f64(v.into()),
                <f16 as Element>::from_f64(v.into()),
            );
            assert_eq!(b.to_bits(), bf16::from_f32(v).to_bits(), "bf16 of {v:e}");
            assert_eq!(h.to_bits(), f16::from_f32(v).to_bits(), "f16 of {v:e}");
        }
        // Just above the midpoint of bf16's 1 and 1 + 2⁻⁷ (and of f16's 1 and 1 + 2⁻¹⁰): f32
        // would round it to the midpoint, and a tie to the even 1.
        let above = |mid: f64| mid + 2f64.powi(-40);
        let b: bf16 = Element::from_f64(above(1.0 + 2f64.powi(-8)));
        assert_eq!(b.to_f64(), 1.0 + 2f64.powi(-7));
        let h: f16 = Element::from_f64(above(1.0 + 2f64.powi(-11)));
        assert_eq!(h.to_f64(), 1.0 + 2f64.powi(-10));
        let below: bf16 = Element::from_f64(-above(1.0 + 2f64.powi(-8)));
        assert_eq!(below.to_f64(), -(1.0 + 2f64.powi(-7)));
        // Past the type's range: infinite; NaN stays NaN.
        let huge: bf16 = Element::from_f64(1e300);
        assert!(huge.to_f64().is_infinite());
        assert!(<f16 as Element>::from_f64(f64::NAN).to_f64().is_nan());
    }
}
