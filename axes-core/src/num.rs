//! Arithmetic on elements: [`Num`] for every numeric element type, [`Float`] for the
//! floating-point ones. Integer arithmetic wraps and integer division by zero gives 0, so
//! evaluation never panics; f16 and bf16 compute in f32.

use half::{bf16, f16};

use crate::element::Element;
use crate::halves::Half;
use crate::math;

/// Numeric element types (all but bool).
pub trait Num: Element {
    /// `a + b` (wrapping for integers).
    fn add(self, b: Self) -> Self;
    /// `a - b` (wrapping for integers).
    fn sub(self, b: Self) -> Self;
    /// `a * b` (wrapping for integers).
    fn mul(self, b: Self) -> Self;
    /// `a / b` (integers: truncating, 0 when `b` is 0, wrapping for `MIN / -1`).
    fn div(self, b: Self) -> Self;
    /// The remainder of `a / b`, truncated like Rust's `%`: its sign is `a`'s (integers: 0
    /// when `b` is 0, noted as a division by zero like `div`, and 0 for `MIN % -1`; floats:
    /// C's `fmod`).
    fn rem(self, b: Self) -> Self;
    /// `-a` (wrapping for integers; `0 - a` for u8).
    fn neg(self) -> Self;
    /// The larger value; NaN if either is NaN.
    fn max(self, b: Self) -> Self;
    /// The smaller value; NaN if either is NaN.
    fn min(self, b: Self) -> Self;
    /// `|a|` (wrapping for `MIN`).
    fn abs(self) -> Self;
    /// -1, 0 or 1 (NaN stays NaN).
    fn signum(self) -> Self;
    /// The smallest value (-inf for floats): the identity of `max`.
    fn lowest() -> Self;
    /// The largest value (+inf for floats): the identity of `min`.
    fn highest() -> Self;
    /// `a` raised to the integer power `n` (integers: wrapping; negative `n` gives 0 unless
    /// `a` is ±1).
    fn powi(self, n: i32) -> Self;
}

/// Floating-point element types.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a float type: this needs f32, f64, f16 or bf16 elements",
    label = "integer or bool elements here",
    note = "cast to a float type first, e.g. `x.cast::<f32>()`"
)]
pub trait Float: Num {
    /// The type values of this type are combined in where rounding each step would lose
    /// them — an optimizer's update, its constants: f32 for f16 and bf16, the type itself
    /// for f32 and f64.
    type Wide: Float;
    /// e^x
    fn exp(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// 1 / sqrt(x)
    fn rsqrt(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// 1 / (1 + e^-x)
    fn sigmoid(self) -> Self;
    /// GELU, tanh approximation: `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`.
    fn gelu(self) -> Self;
    /// GELU's derivative (tanh approximation), what its backward pass multiplies by.
    fn gelu_derivative(self) -> Self;
    /// Softplus, `ln(1 + e^x)`: as accurate where `e^x` is tiny as where it is huge.
    fn softplus(self) -> Self;
    /// Sine.
    fn sin(self) -> Self;
    /// Cosine.
    fn cos(self) -> Self;
    /// x^y
    fn powf(self, y: Self) -> Self;
    /// Round down.
    fn floor(self) -> Self;
    /// Round up.
    fn ceil(self) -> Self;
    /// `a * b + c`.
    fn mul_add(self, b: Self, c: Self) -> Self;
    /// Not a number.
    fn nan() -> Self;
    /// `values` as [`Float::Wide`] when that is this type itself (f32, f64), so that a kernel
    /// computing in `Wide` reads them where they are; `None` for f16 and bf16.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::Float;
    /// assert_eq!(f32::as_wide(&[1.0, 2.0]), Some(&[1.0f32, 2.0][..]));
    /// assert!(half::bf16::as_wide(&[half::bf16::ONE]).is_none());
    /// ```
    fn as_wide(values: &[Self]) -> Option<&[Self::Wide]>;
    /// The value as a [`Float::Wide`] (exact).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::Float;
    /// assert_eq!(half::f16::from_f32(0.1).to_wide(), 0.0999755859375f32);
    /// ```
    fn to_wide(self) -> Self::Wide;
    /// The value nearest `wide` (ties to even; `wide` itself for f32 and f64).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::Float;
    /// assert_eq!(half::bf16::from_wide(1.0 + 1.0 / 256.0), half::bf16::ONE); // a tie, to even
    /// ```
    fn from_wide(wide: Self::Wide) -> Self;
    /// Whether this is NaN.
    fn is_nan(self) -> bool;
}

/// Integer element types: bitwise operations and shifts.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an integer type: this needs i32, i64 or u8 elements",
    label = "float or bool elements here",
    note = "cast to an integer type first, e.g. `x.cast::<i32>()`"
)]
pub trait Int: Num {
    /// `a & b`
    fn bit_and(self, b: Self) -> Self;
    /// `a | b`
    fn bit_or(self, b: Self) -> Self;
    /// `a ^ b`
    fn bit_xor(self, b: Self) -> Self;
    /// `!a` (every bit flipped)
    fn bit_not(self) -> Self;
    /// `a << b`, the shift taken modulo the type's width (Rust's `wrapping_shl`).
    fn shl(self, b: Self) -> Self;
    /// `a >> b`, arithmetic for signed types, the shift taken modulo the type's width
    /// (Rust's `wrapping_shr`).
    fn shr(self, b: Self) -> Self;
}

macro_rules! int_bits {
    ($($t:ty),*) => {$(
        impl Int for $t {
            #[inline(always)] fn bit_and(self, b: Self) -> Self { self & b }
            #[inline(always)] fn bit_or(self, b: Self) -> Self { self | b }
            #[inline(always)] fn bit_xor(self, b: Self) -> Self { self ^ b }
            #[inline(always)] fn bit_not(self) -> Self { !self }
            #[inline(always)] fn shl(self, b: Self) -> Self { self.wrapping_shl(b as u32) }
            #[inline(always)] fn shr(self, b: Self) -> Self { self.wrapping_shr(b as u32) }
        }
    )*};
}

int_bits!(i32, i64, u8);

thread_local! {
    /// Set when an integer division by zero happened on this thread (see
    /// [`take_division_by_zero`]).
    static DIVIDED_BY_ZERO: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// An integer division by zero: noted for the evaluation running on this thread to report
/// as an error, and 0 meanwhile (the evaluation's result is discarded).
#[cold]
#[inline(never)]
fn divided_by_zero<T: Default>() -> T {
    DIVIDED_BY_ZERO.with(|flag| flag.set(true));
    T::default()
}

/// Whether an integer division by zero happened on this thread since the last call.
pub(crate) fn take_division_by_zero() -> bool {
    DIVIDED_BY_ZERO.with(|flag| flag.replace(false))
}

macro_rules! int_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)] fn add(self, b: Self) -> Self { self.wrapping_add(b) }
            #[inline(always)] fn sub(self, b: Self) -> Self { self.wrapping_sub(b) }
            #[inline(always)] fn mul(self, b: Self) -> Self { self.wrapping_mul(b) }
            #[inline(always)] fn div(self, b: Self) -> Self { if b == 0 { divided_by_zero() } else { self.wrapping_div(b) } }
            #[inline(always)] fn rem(self, b: Self) -> Self { if b == 0 { divided_by_zero() } else { self.wrapping_rem(b) } }
            #[inline(always)] fn neg(self) -> Self { (0 as $t).wrapping_sub(self) }
            #[inline(always)] fn max(self, b: Self) -> Self { Ord::max(self, b) }
            #[inline(always)] fn min(self, b: Self) -> Self { Ord::min(self, b) }
            #[inline(always)] fn abs(self) -> Self { if self < (0 as $t) { self.neg() } else { self } }
            #[inline(always)] fn signum(self) -> Self { (self > 0 as $t) as $t - ((self < 0 as $t) as $t) }
            fn lowest() -> Self { <$t>::MIN }
            fn highest() -> Self { <$t>::MAX }
            fn powi(self, n: i32) -> Self {
                if n >= 0 {
                    self.wrapping_pow(n as u32)
                } else if self == 1 {
                    1
                } else if self.abs() == 1 {
                    if n % 2 == 0 { 1 } else { self }
                } else {
                    0
                }
            }
        }
    )*};
}

int_num!(i32, i64);

impl Num for u8 {
    #[inline(always)]
    fn add(self, b: Self) -> Self {
        self.wrapping_add(b)
    }
    #[inline(always)]
    fn sub(self, b: Self) -> Self {
        self.wrapping_sub(b)
    }
    #[inline(always)]
    fn mul(self, b: Self) -> Self {
        self.wrapping_mul(b)
    }
    #[inline(always)]
    fn div(self, b: Self) -> Self {
        self.checked_div(b).unwrap_or_else(divided_by_zero)
    }
    #[inline(always)]
    fn rem(self, b: Self) -> Self {
        self.checked_rem(b).unwrap_or_else(divided_by_zero)
    }
    #[inline(always)]
    fn neg(self) -> Self {
        0u8.wrapping_sub(self)
    }
    #[inline(always)]
    fn max(self, b: Self) -> Self {
        Ord::max(self, b)
    }
    #[inline(always)]
    fn min(self, b: Self) -> Self {
        Ord::min(self, b)
    }
    #[inline(always)]
    fn abs(self) -> Self {
        self
    }
    #[inline(always)]
    fn signum(self) -> Self {
        u8::from(self > 0)
    }
    fn lowest() -> Self {
        0
    }
    fn highest() -> Self {
        u8::MAX
    }
    fn powi(self, n: i32) -> Self {
        if n >= 0 {
            self.wrapping_pow(n as u32)
        } else if self == 1 {
            1
        } else {
            0
        }
    }
}

macro_rules! float_num {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)] fn add(self, b: Self) -> Self { self + b }
            #[inline(always)] fn sub(self, b: Self) -> Self { self - b }
            #[inline(always)] fn mul(self, b: Self) -> Self { self * b }
            #[inline(always)] fn div(self, b: Self) -> Self { self / b }
            #[inline(always)] fn rem(self, b: Self) -> Self { self % b }
            #[inline(always)] fn neg(self) -> Self { -self }
            #[inline(always)] fn max(self, b: Self) -> Self {
                if self.is_nan() || b.is_nan() { <$t>::NAN } else if self > b { self } else { b }
            }
            #[inline(always)] fn min(self, b: Self) -> Self {
                if self.is_nan() || b.is_nan() { <$t>::NAN } else if self < b { self } else { b }
            }
            #[inline(always)] fn abs(self) -> Self { <$t>::abs(self) }
            #[inline(always)] fn signum(self) -> Self {
                if self.is_nan() { self } else if self > 0.0 { 1.0 } else if self < 0.0 { -1.0 } else { 0.0 }
            }
            fn lowest() -> Self { <$t>::NEG_INFINITY }
            fn highest() -> Self { <$t>::INFINITY }
            #[inline(always)] fn powi(self, n: i32) -> Self { <$t>::powi(self, n) }
        }
    )*};
}

float_num!(f32, f64);

impl Float for f32 {
    type Wide = f32;
    #[inline(always)]
    fn exp(self) -> Self {
        math::exp_f32(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        math::ln_f32(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn rsqrt(self) -> Self {
        1.0 / f32::sqrt(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        math::tanh_f32(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        math::sigmoid_f32(self)
    }
    #[inline(always)]
    fn gelu(self) -> Self {
        math::gelu_f32(self)
    }
    #[inline(always)]
    fn gelu_derivative(self) -> Self {
        math::gelu_derivative_f32(self)
    }
    #[inline(always)]
    fn softplus(self) -> Self {
        // x + ln(1 + e^-x) above 0, so that e^x never overflows; ln_1p keeps e^x's digits
        // where it is tiny. NaN takes the second branch and stays NaN.
        if self > 0.0 {
            self + f32::exp(-self).ln_1p()
        } else {
            f32::exp(self).ln_1p()
        }
    }
    #[inline(always)]
    fn sin(self) -> Self {
        f32::sin(self)
    }
    #[inline(always)]
    fn cos(self) -> Self {
        f32::cos(self)
    }
    #[inline(always)]
    fn powf(self, y: Self) -> Self {
        f32::powf(self, y)
    }
    #[inline(always)]
    fn floor(self) -> Self {
        f32::floor(self)
    }
    #[inline(always)]
    fn ceil(self) -> Self {
        f32::ceil(self)
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        self * b + c
    }
    fn nan() -> Self {
        f32::NAN
    }
    #[inline(always)]
    fn as_wide(values: &[Self]) -> Option<&[Self]> {
        Some(values)
    }
    #[inline(always)]
    fn to_wide(self) -> Self {
        self
    }
    #[inline(always)]
    fn from_wide(wide: Self) -> Self {
        wide
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
}

impl Float for f64 {
    type Wide = f64;
    #[inline(always)]
    fn exp(self) -> Self {
        f64::exp(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        f64::ln(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    #[inline(always)]
    fn rsqrt(self) -> Self {
        1.0 / f64::sqrt(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        f64::tanh(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        // e^-|x| never overflows; below 0, σ(x) = e^x / (1 + e^x) keeps its relative accuracy.
        let e = f64::exp(-self.abs());
        let s = 1.0 / (1.0 + e);
        if self >= 0.0 { s } else { e * s }
    }
    #[inline(always)]
    fn gelu(self) -> Self {
        // x σ(2u), as `math::gelu_f32`.
        let inner = self + 0.044715 * self * self * self;
        self * (2.0 * 0.797_884_560_802_865_4 * inner).sigmoid()
    }
    #[inline(always)]
    fn gelu_derivative(self) -> Self {
        // As `math::gelu_derivative_f32`.
        const TWICE_SQRT_2_OVER_PI: f64 = 2.0 * 0.797_884_560_802_865_4;
        let v = TWICE_SQRT_2_OVER_PI * (self + 0.044715 * self * self * self);
        let e = f64::exp(-v.abs());
        let r = 1.0 / (1.0 + e);
        let s = if v >= 0.0 { r } else { e * r };
        let xs = if self.abs() < 64.0 { self } else { 0.0 };
        s + xs * (e * r * r) * TWICE_SQRT_2_OVER_PI * (1.0 + 0.134145 * xs * xs)
    }
    #[inline(always)]
    fn softplus(self) -> Self {
        // As for f32.
        if self > 0.0 {
            self + f64::exp(-self).ln_1p()
        } else {
            f64::exp(self).ln_1p()
        }
    }
    #[inline(always)]
    fn sin(self) -> Self {
        f64::sin(self)
    }
    #[inline(always)]
    fn cos(self) -> Self {
        f64::cos(self)
    }
    #[inline(always)]
    fn powf(self, y: Self) -> Self {
        f64::powf(self, y)
    }
    #[inline(always)]
    fn floor(self) -> Self {
        f64::floor(self)
    }
    #[inline(always)]
    fn ceil(self) -> Self {
        f64::ceil(self)
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        self * b + c
    }
    fn nan() -> Self {
        f64::NAN
    }
    #[inline(always)]
    fn as_wide(values: &[Self]) -> Option<&[Self]> {
        Some(values)
    }
    #[inline(always)]
    fn to_wide(self) -> Self {
        self
    }
    #[inline(always)]
    fn from_wide(wide: Self) -> Self {
        wide
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
}

/// f16 and bf16 compute in f32 and round back.
macro_rules! half_float {
    ($($t:ty),*) => {$(
        impl Num for $t {
            #[inline(always)] fn add(self, b: Self) -> Self { <$t>::narrow(self.widen() + b.widen()) }
            #[inline(always)] fn sub(self, b: Self) -> Self { <$t>::narrow(self.widen() - b.widen()) }
            #[inline(always)] fn mul(self, b: Self) -> Self { <$t>::narrow(self.widen() * b.widen()) }
            #[inline(always)] fn div(self, b: Self) -> Self { <$t>::narrow(self.widen() / b.widen()) }
            #[inline(always)] fn rem(self, b: Self) -> Self { <$t>::narrow(self.widen() % b.widen()) }
            #[inline(always)] fn neg(self) -> Self { -self }
            #[inline(always)] fn max(self, b: Self) -> Self { <$t>::narrow(Num::max(self.widen(), b.widen())) }
            #[inline(always)] fn min(self, b: Self) -> Self { <$t>::narrow(Num::min(self.widen(), b.widen())) }
            #[inline(always)] fn abs(self) -> Self { <$t>::narrow(self.widen().abs()) }
            #[inline(always)] fn signum(self) -> Self { <$t>::narrow(Num::signum(self.widen())) }
            fn lowest() -> Self { <$t>::NEG_INFINITY }
            fn highest() -> Self { <$t>::INFINITY }
            fn powi(self, n: i32) -> Self { <$t>::narrow(self.widen().powi(n)) }
        }

        impl Float for $t {
            type Wide = f32;
            #[inline(always)] fn exp(self) -> Self { <$t>::narrow(Float::exp(self.widen())) }
            #[inline(always)] fn ln(self) -> Self { <$t>::narrow(Float::ln(self.widen())) }
            #[inline(always)] fn sqrt(self) -> Self { <$t>::narrow(self.widen().sqrt()) }
            #[inline(always)] fn rsqrt(self) -> Self { <$t>::narrow(1.0 / self.widen().sqrt()) }
            #[inline(always)] fn tanh(self) -> Self { <$t>::narrow(Float::tanh(self.widen())) }
            #[inline(always)] fn sigmoid(self) -> Self { <$t>::narrow(Float::sigmoid(self.widen())) }
            #[inline(always)] fn gelu(self) -> Self { <$t>::narrow(Float::gelu(self.widen())) }
            #[inline(always)] fn gelu_derivative(self) -> Self { <$t>::narrow(Float::gelu_derivative(self.widen())) }
            #[inline(always)] fn softplus(self) -> Self { <$t>::narrow(Float::softplus(self.widen())) }
            #[inline(always)] fn sin(self) -> Self { <$t>::narrow(self.widen().sin()) }
            #[inline(always)] fn cos(self) -> Self { <$t>::narrow(self.widen().cos()) }
            #[inline(always)] fn powf(self, y: Self) -> Self { <$t>::narrow(self.widen().powf(y.widen())) }
            #[inline(always)] fn floor(self) -> Self { <$t>::narrow(self.widen().floor()) }
            #[inline(always)] fn ceil(self) -> Self { <$t>::narrow(self.widen().ceil()) }
            #[inline(always)] fn mul_add(self, b: Self, c: Self) -> Self {
                <$t>::narrow(self.widen() * b.widen() + c.widen())
            }
            fn nan() -> Self { <$t>::NAN }
            fn as_wide(_: &[Self]) -> Option<&[f32]> { None }
            #[inline(always)] fn to_wide(self) -> f32 { self.widen() }
            #[inline(always)] fn from_wide(wide: f32) -> Self { <$t>::narrow(wide) }
            #[inline(always)] fn is_nan(self) -> bool { <$t>::is_nan(self) }
        }
    )*};
}

half_float!(f16, bf16);
