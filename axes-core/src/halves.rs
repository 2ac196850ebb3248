//! The half types to and from f32, one value at a time, in code the compiler vectorises.
//!
//! `half`'s own `f16::to_f32`/`from_f32` ask the CPU for F16C at every call (where the crate
//! is not built for it) and call out of line, so a loop over f16 values stays scalar; these
//! are integer and float arithmetic with selects instead of branches, inlined, and give the
//! same bits as the hardware conversions (round to nearest, ties to even; NaNs quieted with
//! their payload kept). bf16's conversions in `half` are already such arithmetic.

use half::{bf16, f16};

/// f16 and bf16: an f32 exactly ([`Half::widen`]) and an f32 rounded to the nearest value,
/// ties to even ([`Half::narrow`]).
pub(crate) trait Half: Copy {
    /// The value as an f32 (exact).
    fn widen(self) -> f32;
    /// The value nearest `v`, ties to even.
    fn narrow(v: f32) -> Self;
}

impl Half for f16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        f32::from_bits(f16_to_f32_bits(self.to_bits()))
    }
    #[inline(always)]
    fn narrow(v: f32) -> Self {
        f16::from_bits(f32_to_f16_bits(v.to_bits()))
    }
}

impl Half for bf16 {
    #[inline(always)]
    fn widen(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn narrow(v: f32) -> Self {
        bf16::from_f32(v)
    }
}

/// The f32 bits of the f16 whose bits are `h`.
#[inline(always)]
fn f16_to_f32_bits(h: u16) -> u32 {
    let h = u32::from(h);
    let sign = (h & 0x8000) << 16;
    let magnitude = (h & 0x7fff) << 13; // exponent and fraction in f32's places
    let exponent = magnitude & (0x1f << 23);
    // Normal: rebias the exponent from 15 to 127.
    let normal = magnitude + ((127 - 15) << 23);
    // Infinity and NaN: the largest exponent, NaNs quieted (as the hardware does).
    let quiet = u32::from(magnitude & 0x007f_ffff != 0) << 22;
    let special = magnitude | (0xff << 23) | quiet;
    // Subnormal (and zero): the fraction times 2⁻²⁴, which f32 holds exactly.
    let subnormal = ((magnitude >> 13) as f32 * f32::from_bits((127 - 24) << 23)).to_bits();
    let bits = if exponent == 0x1f << 23 {
        special
    } else if exponent == 0 {
        subnormal
    } else {
        normal
    };
    sign | bits
}

/// The f16 bits of the f32 whose bits are `f`, rounded to nearest, ties to even.
#[inline(always)]
fn f32_to_f16_bits(f: u32) -> u16 {
    let sign = (f >> 16) & 0x8000;
    let magnitude = f & 0x7fff_ffff;
    // NaN: quiet, the payload's top bits kept; infinity, and everything from 65520 up
    // (which rounds past the largest f16), is infinity.
    let nan = 0x7e00 | ((magnitude & 0x007f_ffff) >> 13);
    let overflow = 0x7c00;
    // Below 2⁻¹⁴: a subnormal f16 (or zero). Adding 0.5 (2⁻¹) lands the value's f16
    // fraction in f32's last 10 bits, rounded to nearest even by the float addition.
    let below = (f32::from_bits(magnitude) + 0.5).to_bits() - 0.5f32.to_bits();
    // Normal: rebias and round the 13 dropped bits to nearest even by an addition (a carry
    // into the exponent is the right result, up to infinity).
    let odd = (magnitude >> 13) & 1;
    // (Computed for every value, used for normal ones: wrapping where it is not used.)
    let normal = magnitude
        .wrapping_sub((127 - 15) << 23)
        .wrapping_add(0x0fff + odd)
        >> 13;
    let bits = if magnitude > 0x7f80_0000 {
        nan
    } else if magnitude >= 0x477f_f000 {
        // 65520 and up: rounds to infinity.
        overflow
    } else if magnitude < 0x3880_0000 {
        below
    } else {
        normal
    };
    (sign | bits) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn same_f16(f: u32) {
        let want = f16::from_f32(f32::from_bits(f)).to_bits();
        assert_eq!(
            f32_to_f16_bits(f),
            want,
            "f16 of {:e} ({f:#010x})",
            f32::from_bits(f)
        );
    }

    #[test]
    fn every_f16_widens_as_half_does() {
        for h in 0..=u16::MAX {
            let want = f16::from_bits(h).to_f32().to_bits();
            assert_eq!(f16_to_f32_bits(h), want, "f16 {h:#06x}");
        }
    }

    #[test]
    fn f32_values_narrow_as_half_does() {
        // Every exponent with the fractions around each rounding boundary, then random bits.
        for exponent in 0..=255u32 {
            for fraction in [
                0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000, 0x7f_e000,
            ] {
                for low in [0, 1, 0x7ff, 0x800, 0xfff] {
                    for sign in [0, 0x8000_0000] {
                        same_f16(sign | (exponent << 23) | (fraction & !0x1fff) | low);
                        same_f16(sign | (exponent << 23) | fraction);
                    }
                }
            }
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(16);
        for _ in 0..200_000 {
            same_f16(rng.random());
        }
    }

    /// All 2³² f32 values (about 10 s in a release build):
    /// `cargo test -p axes-core --release --lib halves -- --ignored`.
    #[test]
    #[ignore = "exhaustive: run by hand in a release build"]
    fn every_f32_narrows_as_half_does() {
        for f in 0..=u32::MAX {
            same_f16(f);
        }
    }
}
