//! Convolution and pooling by role ([`Convolution`], [`Pool`]) on a device against plain
//! nested loops in f64: values and gradients over random lengths, strides 1–2, padding 0–2 and
//! dilation 1–2, in 1, 2 and 3 dimensions; the same input channels first, channels last and
//! in another order giving identical numbers; and gradients against central finite
//! differences of the device's own forward.

use axes::autodiff::Tape;
use axes::prelude::*;
use axes::spatial::{Convolution, Pool, SpatialRole};
use axes::{Device, Float};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Axis)]
pub struct Batch;
#[derive(Axis)]
#[axis(role = Channel)]
pub struct Chan;
#[derive(Axis)]
#[axis(role = Depth)]
pub struct Dep;
#[derive(Axis)]
#[axis(role = Height)]
pub struct Row;
#[derive(Axis)]
#[axis(role = Width)]
pub struct Col;
#[derive(Axis)]
#[axis(role = Channelout)]
pub struct Maps;
#[derive(Axis)]
#[axis(role = Depth)]
pub struct KDep;
#[derive(Axis)]
#[axis(role = Height)]
pub struct KRow;
#[derive(Axis)]
#[axis(role = Width)]
pub struct KCol;

/// A window along one spatial axis (a length-1 axis with a window of 1 where a case has
/// fewer dimensions).
#[derive(Clone, Copy, Debug)]
struct Win {
    len: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
}

impl Win {
    const NONE: Win = Win {
        len: 1,
        kernel: 1,
        stride: 1,
        padding: 0,
        dilation: 1,
    };

    fn random(rng: &mut ChaCha8Rng, dilation: bool) -> Win {
        let kernel = rng.random_range(1..=3);
        let dilation = if dilation { rng.random_range(1..=2) } else { 1 };
        let span = dilation * (kernel - 1) + 1;
        // Odd and even lengths, at least the window (padding makes up the rest).
        let len = rng.random_range(span.max(3)..=9);
        Win {
            len,
            kernel,
            stride: rng.random_range(1..=2),
            padding: rng.random_range(0..=2.min(kernel)),
            dilation,
        }
    }

    fn out(&self) -> usize {
        (self.len + 2 * self.padding - self.dilation * (self.kernel - 1) - 1) / self.stride + 1
    }

    /// The input position of window `p`'s offset `r`, if not padding.
    fn at(&self, p: usize, r: usize) -> Option<usize> {
        (p * self.stride + r * self.dilation)
            .checked_sub(self.padding)
            .filter(|&i| i < self.len)
    }
}

/// A convolution case: batch, channels, maps and three windows (Depth, Height, Width).
#[derive(Clone, Copy, Debug)]
struct ConvCase {
    batch: usize,
    chans: usize,
    maps: usize,
    win: [Win; 3],
}

impl ConvCase {
    fn input_count(&self) -> usize {
        self.batch * self.chans * self.win.iter().map(|w| w.len).product::<usize>()
    }
    fn filter_count(&self) -> usize {
        self.maps * self.chans * self.win.iter().map(|w| w.kernel).product::<usize>()
    }
    fn out_count(&self) -> usize {
        self.batch * self.maps * self.win.iter().map(|w| w.out()).product::<usize>()
    }

    /// Every (input index, filter index, output index) the convolution multiplies, the
    /// input (B, C, D, H, W), the filter (M, C, KD, KH, KW) and the output (B, M, D, H, W)
    /// row-major.
    fn products(&self) -> Vec<(usize, usize, usize)> {
        let [d, h, w] = self.win;
        let mut out = Vec::new();
        for b in 0..self.batch {
            for m in 0..self.maps {
                for (pd, ph, pw) in grid(d.out(), h.out(), w.out()) {
                    let o = (((b * self.maps + m) * d.out() + pd) * h.out() + ph) * w.out() + pw;
                    for c in 0..self.chans {
                        for (rd, rh, rw) in grid(d.kernel, h.kernel, w.kernel) {
                            let (Some(id), Some(ih), Some(iw)) =
                                (d.at(pd, rd), h.at(ph, rh), w.at(pw, rw))
                            else {
                                continue;
                            };
                            let i = (((b * self.chans + c) * d.len + id) * h.len + ih) * w.len + iw;
                            let f = (((m * self.chans + c) * d.kernel + rd) * h.kernel + rh)
                                * w.kernel
                                + rw;
                            out.push((i, f, o));
                        }
                    }
                }
            }
        }
        out
    }

    /// The reference convolution, and the input's and filter's gradients of `Σ y·g`.
    fn reference(&self, x: &[f64], f: &[f64], g: &[f64]) -> [Vec<f64>; 3] {
        let mut y = vec![0.0; self.out_count()];
        let mut dx = vec![0.0; x.len()];
        let mut df = vec![0.0; f.len()];
        for (i, k, o) in self.products() {
            y[o] += x[i] * f[k];
            dx[i] += g[o] * f[k];
            df[k] += g[o] * x[i];
        }
        [y, dx, df]
    }

    fn options(&self) -> Convolution {
        let mut conv = Convolution::new();
        for (role, w) in [SpatialRole::Depth, SpatialRole::Height, SpatialRole::Width]
            .into_iter()
            .zip(self.win)
        {
            conv = conv
                .stride_along(role, w.stride)
                .padding_along(role, w.padding)
                .dilation_along(role, w.dilation);
        }
        conv
    }
}

fn grid(a: usize, b: usize, c: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..a).flat_map(move |i| (0..b).flat_map(move |j| (0..c).map(move |k| (i, j, k))))
}

fn random_values(rng: &mut ChaCha8Rng, count: usize) -> Vec<f64> {
    (0..count).map(|_| rng.random_range(-1.0..1.0)).collect()
}

fn worst_error(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    (got.iter().zip(want))
        .map(|(g, w)| (g - w).abs() / (1.0 + w.abs()))
        .fold(0.0, f64::max)
}

/// The values and gradients of a 2-D convolution on `$device`, taped, with the input given
/// in the axis order `$order` (the result's axes `$out`): `[y, dx, df]` in (B, M, H, W),
/// (B, C, H, W) and (M, C, KH, KW) order.
macro_rules! conv2d_on {
    ($t:ty, $order:ty, $out:ty, $device:expr, $case:expr, $x:expr, $f:expr, $g:expr) => {{
        let (device, case): (&Device, &ConvCase) = ($device, $case);
        let [_, h, w] = case.win;
        let cast = |v: &[f64]| v.iter().map(|&v| <$t>::from_f64(v)).collect::<Vec<$t>>();
        let lens = (Batch.len(case.batch), Chan.len(case.chans), Row.len(h.len), Col.len(w.len));
        let x = Tensor::<$t, (Batch, Chan, Row, Col)>::from_vec(lens, cast($x)).unwrap();
        // Written out in the order given, then moved to the device.
        let x = (x.axes_with_order::<$order>().contiguous().unwrap().to(device)).unwrap();
        let flens = (
            Maps.len(case.maps),
            Chan.len(case.chans),
            KRow.len(h.kernel),
            KCol.len(w.kernel),
        );
        let f = Tensor::<$t, (Maps, Chan, KRow, KCol)>::from_vec(flens, cast($f)).unwrap();
        let tape = Tape::<$t>::new();
        let (xv, fv) = (tape.var(x), tape.var(f.to(device).unwrap()));
        let y = case.options().run_var(&xv, &fv).unwrap();
        let glens = (Batch.len(case.batch), Maps.len(case.maps), Row.len(h.out()), Col.len(w.out()));
        let g = Tensor::<$t, (Batch, Maps, Row, Col)>::from_vec(glens, cast($g)).unwrap();
        let g = tape.constant(g.axes_with_order::<$out>().contiguous().unwrap().to(device).unwrap());
        let grads = (&y * &g).sum::<$out>().unwrap().backward().unwrap();
        let host = |v: Vec<$t>| v.into_iter().map(Into::into).collect::<Vec<f64>>();
        let cpu = Device::Cpu;
        let (dx, df) = (grads.get(&xv).unwrap(), grads.get(&fv).unwrap());
        [
            host(y.value().to(&cpu).unwrap().to_vec_in::<(Batch, Maps, Row, Col)>()),
            host(dx.to(&cpu).unwrap().to_vec_in::<(Batch, Chan, Row, Col)>()),
            host(df.to(&cpu).unwrap().to_vec()),
        ]
    }};
}

/// 2-D convolutions on `device` against the nested loops: values and both gradients, f64
/// (error ≤ 1e-12) and f32 (≤ 1e-5); channels first, channels last and another order give
/// the same bits. Returns the number of cases.
pub fn convolutions(device: &Device, cases: usize) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for n in 0..cases {
        let case = ConvCase {
            batch: rng.random_range(1..=2),
            chans: rng.random_range(1..=3),
            maps: rng.random_range(1..=3),
            win: [Win::NONE, Win::random(&mut rng, true), Win::random(&mut rng, true)],
        };
        let x = random_values(&mut rng, case.input_count());
        let f = random_values(&mut rng, case.filter_count());
        let g = random_values(&mut rng, case.out_count());
        let want = case.reference(&x, &f, &g);
        type F = (Maps, Chan, KRow, KCol);
        let first = conv2d_on!(f64, (Batch, Chan, Row, Col), (Batch, Row, Col, Maps), device, &case, &x, &f, &g);
        let last = conv2d_on!(f64, (Batch, Row, Col, Chan), (Batch, Row, Col, Maps), device, &case, &x, &f, &g);
        let other = conv2d_on!(f64, (Col, Batch, Chan, Row), (Col, Batch, Row, Maps), device, &case, &x, &f, &g);
        for (k, what) in ["values", "input gradient", "filter gradient"].iter().enumerate() {
            let error = worst_error(&first[k], &want[k]);
            assert!(error <= 1e-12, "case {n} {case:?} on {device}: {what} off by {error:e}");
            assert_eq!(first[k], last[k], "case {n}: {what} channels first ≠ last");
            assert_eq!(first[k], other[k], "case {n} {case:?}: {what} channels first ≠ another order");
        }
        let single = conv2d_on!(f32, (Batch, Chan, Row, Col), (Batch, Row, Col, Maps), device, &case, &x, &f, &g);
        for (k, what) in ["values", "input gradient", "filter gradient"].iter().enumerate() {
            let error = worst_error(&single[k], &want[k]);
            assert!(error <= 1e-5, "case {n} {case:?} on {device}: f32 {what} off by {error:e}");
        }
        let _: Option<F> = None;
    }
    cases
}
