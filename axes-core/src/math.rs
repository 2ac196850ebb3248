//! Vectorisable f32 approximations of exp, ln, tanh and sigmoid (and through sigmoid, GELU).
//!
//! std's `f32::exp` and friends call libm one element at a time. These are branch-free
//! (every `if` is a select), use only adds, multiplies, fused multiply-adds, compares and bit
//! operations, so the compiler turns a loop over them into SIMD code, at whatever vector width
//! the engine's run-time CPU dispatch selects (AVX-512 or AVX2, both with FMA; the baseline
//! path calls a correctly rounded `fma` instead, so the results are the same bits on every
//! path). Accuracy in units in the last place (ulp) against the f64 function
//! rounded to f32, measured over every f32 value (`cargo test --release -p axes-core --lib
//! math -- --ignored`), with subnormal results and inputs included:
//!
//! | function | max error | where |
//! | --- | --- | --- |
//! | [`exp_f32`] | 1 ulp | |
//! | [`ln_f32`] | 1 ulp | |
//! | [`tanh_f32`] | 2 ulp | |
//! | [`sigmoid_f32`] | 3 ulp | at x ≈ −1.1 |
//! | [`gelu_f32`] | 48 ulp from x = −5 on; 250 ulp below | at x ≈ −4.9 and −9.9 |
//!
//! GELU's error follows its condition number `|x f′(x) / f(x)|`, which grows like x² for
//! negative x (about 35 at −5, 230 at −10, where the result is about 1e-36): the rounding
//! of its argument `u = √(2/π) (x + 0.044715 x³)` to f32 alone moves the result that many
//! ulp.
//!
//! `cargo test` checks these bounds on 10^7 values spread over every exponent, and the
//! special values (±0, ±inf, NaN, subnormals).

// The polynomial coefficients are written as published (Cephes), digits beyond f32 included.
#![allow(clippy::excessive_precision)]

/// 1.5 * 2^23: adding it rounds an f32 of magnitude below 2^22 to an integer, which then
/// sits in the low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `a * b + c` rounded once: one instruction on every CPU the engine vectorises for (FMA
/// comes with AVX2 and AVX-512), so each step of a polynomial costs one.
#[inline(always)]
fn fma(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}

/// The exponent's reduction shared by [`exp_f32`] and [`tanh_f32`]: for `x` in the range
/// where the caller clamped it, the integer `n` and `e^r − 1` with `x = n ln 2 + r`,
/// `|r| ≤ ln 2 / 2`.
#[inline(always)]
fn reduce_exp(x: f32) -> (i32, f32) {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let shifted = fma(x, LOG2E, ROUND_MAGIC);
    let n = shifted - ROUND_MAGIC;
    let n_int = shifted.to_bits().wrapping_sub(ROUND_MAGIC.to_bits()) as i32;
    let r = fma(n, -LN2_LO, fma(n, -LN2_HI, x));
    let mut p = 1.987_569_1e-4_f32;
    p = fma(p, r, 1.398_199_9e-3);
    p = fma(p, r, 8.333_452e-3);
    p = fma(p, r, 4.166_579_6e-2);
    p = fma(p, r, 1.666_666_5e-1);
    p = fma(p, r, 5.000_000_1e-1);
    (n_int, fma(p * r, r, r))
}

/// 2^k for `k` in the normal exponents' range.
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

/// e^x.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    // Below ln 2^-150 the result rounds to 0; from ln(smallest normal) down to it, it is
    // subnormal (computed as a normal value times two powers of 2, rounded once).
    const LOW: f32 = -103.972_08;
    const HIGH: f32 = 88.722_84; // ln(f32::MAX)
    // NaN fails both comparisons and flows through as NaN.
    let (n, expm1_r) = reduce_exp(x.clamp(LOW, HIGH));
    // 2^n as two factors, so that n = 128 (near the top of the range) does not overflow and
    // n down to -150 (subnormal results) does not underflow before the last product.
    let n_hi = n >> 1;
    let result = (expm1_r + 1.0) * pow2(n_hi) * pow2(n - n_hi);
    if x < LOW {
        0.0
    } else if x > HIGH {
        f32::INFINITY
    } else {
        result
    }
}

/// Natural logarithm (NaN below 0, -inf at 0).
#[inline(always)]
pub fn ln_f32(x: f32) -> f32 {
    const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
    let subnormal = x < f32::MIN_POSITIVE;
    let scaled = if subnormal { x * 8_388_608.0 } else { x };
    let bits = scaled.to_bits();
    let mut e = ((bits >> 23) & 0xff) as i32 - 127 - if subnormal { 23 } else { 0 };
    // Mantissa in [0.5, 1), then moved to [sqrt(1/2), sqrt(2)).
    let mut m = f32::from_bits((bits & 0x007f_ffff) | 0x3f00_0000);
    let low = m < SQRT_HALF;
    e += if low { 0 } else { 1 };
    m = if low { m + m } else { m };
    let f = m - 1.0;
    let z = f * f;
    let mut p = 7.037_683_6e-2_f32;
    p = fma(p, f, -1.151_461e-1);
    p = fma(p, f, 1.167_699_9e-1);
    p = fma(p, f, -1.242_014_1e-1);
    p = fma(p, f, 1.424_932_3e-1);
    p = fma(p, f, -1.666_805_8e-1);
    p = fma(p, f, 2.000_071_4e-1);
    p = fma(p, f, -2.499_999_4e-1);
    p = fma(p, f, 3.333_333_1e-1);
    let ef = e as f32;
    let y = p * f * z + ef * -2.121_944_4e-4 - 0.5 * z;
    let result = f + y + ef * 0.693_359_4;
    if x == 0.0 {
        f32::NEG_INFINITY
    } else if x.is_nan() || x < 0.0 {
        f32::NAN
    } else if x == f32::INFINITY {
        f32::INFINITY
    } else {
        result
    }
}

/// Hyperbolic tangent, as `−m / (2 + m)` with `m = e^(−2|x|) − 1` and the sign of `x`: the
/// reduction keeps `e^r − 1` apart from the 1, so small `|x|` keep their relative accuracy
/// with no second polynomial.
#[inline(always)]
pub fn tanh_f32(x: f32) -> f32 {
    // From |x| = 9 on, tanh(x) rounds to ±1 (and the clamp passes NaN through).
    let (n, expm1_r) = reduce_exp((-2.0 * x.abs()).clamp(-18.0, 0.0));
    // e^(n ln 2 + r) − 1 = 2^n (e^r − 1) + (2^n − 1), with 2^n − 1 exact for n in [−26, 0].
    let scale = pow2(n);
    let m = fma(scale, expm1_r, scale - 1.0);
    (-m / (2.0 + m)).copysign(x)
}

/// 1 / (1 + e^-x), as e^x / (1 + e^x) below 0 (no overflow, and the relative accuracy of
/// small results is kept).
#[inline(always)]
pub fn sigmoid_f32(x: f32) -> f32 {
    let e = exp_f32(-x.abs());
    let s = 1.0 / (1.0 + e);
    if x >= 0.0 { s } else { e * s }
}

/// GELU (tanh approximation), `0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))`, computed as the
/// equal `x σ(2 √(2/π) (x + 0.044715 x³))`, which keeps its relative accuracy where
/// `1 + tanh` would cancel (large negative x).
#[inline(always)]
pub fn gelu_f32(x: f32) -> f32 {
    const TWICE_SQRT_2_OVER_PI: f32 = (2.0 * 0.797_884_560_802_865_4_f64) as f32;
    let inner = x + 0.044715 * x * x * x;
    x * sigmoid_f32(TWICE_SQRT_2_OVER_PI * inner)
}

/// GELU's derivative (tanh approximation): with `s = σ(2u)`, `u = √(2/π) (x + 0.044715 x³)`,
/// it is `s + x s (1 − s) 2 √(2/π) (1 + 3 · 0.044715 x²)`. Its error is absolute (it
/// crosses 0 near x = −0.75, where no relative bound holds): within 2⁻²¹ of the f64 value.
#[inline(always)]
pub fn gelu_derivative_f32(x: f32) -> f32 {
    const TWICE_SQRT_2_OVER_PI: f32 = (2.0 * 0.797_884_560_802_865_4_f64) as f32;
    let v = TWICE_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
    // s = σ(v) as in `sigmoid_f32`, and s (1 − s) = e / (1 + e)² with e = e^-|v|, which keeps
    // its digits where s is near 1.
    let e = exp_f32(-v.abs());
    let r = 1.0 / (1.0 + e);
    let s = if v >= 0.0 { r } else { e * r };
    // From |x| = 64 on, s (1 − s) is 0 and x² may overflow: the second term is 0 there.
    let xs = if x.abs() < 64.0 { x } else { 0.0 };
    s + xs * (e * r * r) * TWICE_SQRT_2_OVER_PI * (1.0 + 0.134145 * xs * xs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The f32 value's position on a line where adjacent f32 values are 1 apart (±0 at 0).
    fn ordinal(v: f32) -> i64 {
        let bits = v.to_bits();
        let magnitude = i64::from(bits & 0x7fff_ffff);
        if bits >> 31 == 1 {
            -magnitude
        } else {
            magnitude
        }
    }

    /// Units in the last place between `got` and `want` (0 for two NaNs; `u64::MAX` for one).
    fn ulps(got: f32, want: f32) -> u64 {
        match (got.is_nan(), want.is_nan()) {
            (true, true) => 0,
            (false, false) => (ordinal(got) - ordinal(want)).unsigned_abs(),
            _ => u64::MAX,
        }
    }

    /// σ in f64, stably.
    fn sigmoid_f64(x: f64) -> f64 {
        let e = (-x.abs()).exp();
        if x >= 0.0 {
            1.0 / (1.0 + e)
        } else {
            e / (1.0 + e)
        }
    }

    /// GELU (tanh approximation) in f64, through σ (no cancellation for negative x).
    fn gelu_f64(x: f64) -> f64 {
        x * sigmoid_f64(2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x))
    }

    /// GELU's derivative in f64, as `gelu_f64` through σ.
    fn gelu_derivative_f64(x: f64) -> f64 {
        let v = 2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x);
        let (s, rest) = (sigmoid_f64(v), sigmoid_f64(-v));
        let xs = if x.abs() < 64.0 { x } else { 0.0 };
        s + xs * s * rest * 2.0 * 0.7978845608028654 * (1.0 + 0.134145 * xs * xs)
    }

    /// GELU's derivative within 2⁻²¹ of the f64 value (an absolute bound: the derivative
    /// crosses 0) on 10^7 values spread over the bit patterns; NaN stays NaN.
    #[test]
    fn gelu_derivative_within_its_absolute_bound() {
        let step = (1u64 << 32) / 10_000_000;
        let (mut worst, mut at) = (0.0f64, 0.0f32);
        for k in 0..10_000_000u64 {
            let x = f32::from_bits((k * step + k % 7) as u32);
            if x.is_nan() {
                assert!(gelu_derivative_f32(x).is_nan());
                continue;
            }
            let err = (f64::from(gelu_derivative_f32(x)) - gelu_derivative_f64(f64::from(x))).abs();
            if err > worst {
                (worst, at) = (err, x);
            }
        }
        println!("gelu derivative: at most {worst:e} (at {at:e})");
        assert!(worst <= 2f64.powi(-21), "{worst:e} at {at:e}");
        assert_eq!(gelu_derivative_f32(0.0), 0.5);
        assert_eq!(gelu_derivative_f32(f32::INFINITY), 1.0);
    }

    fn everywhere(_: f32) -> bool {
        true
    }

    /// GELU's well-conditioned part (see the module's table).
    fn from_minus_5(x: f32) -> bool {
        x >= -5.0
    }

    /// Each function, its f64 reference, its bound in ulp (the module's table) and the
    /// inputs the bound holds for.
    #[allow(clippy::type_complexity)]
    const FUNCTIONS: [(&str, fn(f32) -> f32, fn(f64) -> f64, u64, fn(f32) -> bool); 6] = [
        ("exp", exp_f32, f64::exp, 1, everywhere),
        ("ln", ln_f32, f64::ln, 1, everywhere),
        ("tanh", tanh_f32, f64::tanh, 2, everywhere),
        ("sigmoid", sigmoid_f32, sigmoid_f64, 3, everywhere),
        ("gelu", gelu_f32, gelu_f64, 250, everywhere),
        ("gelu from -5", gelu_f32, gelu_f64, 48, from_minus_5),
    ];

    /// The largest error of each function over the f32 values whose bits are `bits`, with
    /// the input where it occurs.
    fn worst(bits: impl Iterator<Item = u32> + Clone) -> Vec<(u64, f32)> {
        FUNCTIONS
            .iter()
            .map(|&(_, f, reference, _, domain)| {
                bits.clone()
                    .map(f32::from_bits)
                    .filter(|&x| domain(x))
                    .map(|x| (ulps(f(x), reference(f64::from(x)) as f32), x))
                    .fold((0, 0.0), |a, b| if b.0 > a.0 { b } else { a })
            })
            .collect()
    }

    /// 10^7 values spread evenly over the bit patterns (every exponent, both signs, NaNs,
    /// infinities and subnormals among them) and the special values.
    #[test]
    fn accuracy_in_ulps_on_samples_and_special_values() {
        let step = (1u64 << 32) / 10_000_000;
        let samples = (0..10_000_000u64).map(move |k| (k * step + k % 7) as u32);
        let specials = [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::from_bits(1),
            f32::from_bits(0x8000_0001),
            f32::MAX,
            f32::MIN,
            1.0,
            -1.0,
            88.72,
            -87.34,
            -103.97,
            -104.0,
            0.625,
            -0.625,
        ];
        let all = samples.chain(specials.iter().map(|v| v.to_bits()));
        for ((name, _, _, bound, _), (err, at)) in FUNCTIONS.iter().zip(worst(all)) {
            println!("{name}: at most {err} ulp (at {at:e})");
            assert!(err <= *bound, "{name}: {err} ulp at {at:e} (bound {bound})");
        }
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-104.0), 0.0);
        assert_eq!(exp_f32(100.0), f32::INFINITY);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert!(exp_f32(-100.0) > 0.0, "a subnormal result");
        assert_eq!(ln_f32(0.0), f32::NEG_INFINITY);
        assert_eq!(ln_f32(f32::INFINITY), f32::INFINITY);
        assert!(ln_f32(-1.0).is_nan() && ln_f32(-0.0) == f32::NEG_INFINITY);
        assert_eq!(tanh_f32(50.0), 1.0);
        assert_eq!(tanh_f32(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(sigmoid_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(sigmoid_f32(f32::INFINITY), 1.0);
        for f in [exp_f32, ln_f32, tanh_f32, sigmoid_f32, gelu_f32] {
            assert!(f(f32::NAN).is_nan());
        }
    }

    /// Every f32 value (about a minute on two cores in release):
    /// `cargo test --release -p axes-core --lib math -- --ignored --nocapture`.
    #[test]
    #[ignore = "exhaustive; run by hand in release"]
    fn accuracy_in_ulps_over_every_f32() {
        use rayon::prelude::*;
        let parts: Vec<Vec<(u64, f32)>> = (0..256u32)
            .into_par_iter()
            .map(|high| worst((high << 24)..=((high << 24) | 0x00ff_ffff)))
            .collect();
        for (i, (name, _, _, bound, _)) in FUNCTIONS.iter().enumerate() {
            let (err, at) = parts
                .iter()
                .map(|p| p[i])
                .fold((0, 0.0), |a, b| if b.0 > a.0 { b } else { a });
            println!("{name}: at most {err} ulp over every f32 (at {at:e})");
            assert!(err <= *bound, "{name}: {err} ulp at {at:e} (bound {bound})");
        }
    }
}
