//! Convolution and pooling by role ([`Convolution`], [`Pool`]) on a device against plain
//! nested loops in f64: values and gradients over random lengths, strides 1–2, padding 0–2 and
//! dilation 1–2, in 1, 2 and 3 dimensions; the same input channels first, channels last and
//! in another order giving identical numbers; and gradients against central finite
//! differences of the device's own forward.

use axes::Device;
use axes::autodiff::Tape;
use axes::prelude::*;
use axes::spatial::{Convolution, Pool, SpatialRole};
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
/// A group of channels: an axis the input and the filter share (a grouped convolution).
#[derive(Axis)]
pub struct Group;
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
        let lens = (
            Batch.len(case.batch),
            Chan.len(case.chans),
            Row.len(h.len),
            Col.len(w.len),
        );
        let x = Tensor::<$t, (Batch, Chan, Row, Col)>::from_vec(lens, cast($x)).unwrap();
        // Written out in the order given, then moved to the device.
        let x = (x
            .axes_with_order::<$order>()
            .contiguous()
            .unwrap()
            .to(device))
        .unwrap();
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
        let glens = (
            Batch.len(case.batch),
            Maps.len(case.maps),
            Row.len(h.out()),
            Col.len(w.out()),
        );
        let g = Tensor::<$t, (Batch, Maps, Row, Col)>::from_vec(glens, cast($g)).unwrap();
        let g = tape.constant(
            g.axes_with_order::<$out>()
                .contiguous()
                .unwrap()
                .to(device)
                .unwrap(),
        );
        let grads = (&y * &g).sum::<$out>().unwrap().backward().unwrap();
        let host = |v: Vec<$t>| v.into_iter().map(Into::into).collect::<Vec<f64>>();
        let cpu = Device::Cpu;
        let (dx, df) = (grads.get(&xv).unwrap(), grads.get(&fv).unwrap());
        [
            host(
                y.value()
                    .to(&cpu)
                    .unwrap()
                    .to_vec_in::<(Batch, Maps, Row, Col)>(),
            ),
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
            win: [
                Win::NONE,
                Win::random(&mut rng, true),
                Win::random(&mut rng, true),
            ],
        };
        let x = random_values(&mut rng, case.input_count());
        let f = random_values(&mut rng, case.filter_count());
        let g = random_values(&mut rng, case.out_count());
        let want = case.reference(&x, &f, &g);
        let first = conv2d_on!(
            f64,
            (Batch, Chan, Row, Col),
            (Batch, Row, Col, Maps),
            device,
            &case,
            &x,
            &f,
            &g
        );
        let last = conv2d_on!(
            f64,
            (Batch, Row, Col, Chan),
            (Batch, Row, Col, Maps),
            device,
            &case,
            &x,
            &f,
            &g
        );
        let other = conv2d_on!(
            f64,
            (Col, Batch, Chan, Row),
            (Col, Batch, Row, Maps),
            device,
            &case,
            &x,
            &f,
            &g
        );
        for (k, what) in ["values", "input gradient", "filter gradient"]
            .iter()
            .enumerate()
        {
            let error = worst_error(&first[k], &want[k]);
            assert!(
                error <= 1e-12,
                "case {n} {case:?} on {device}: {what} off by {error:e}"
            );
            assert_eq!(first[k], last[k], "case {n}: {what} channels first ≠ last");
            assert_eq!(
                first[k], other[k],
                "case {n} {case:?}: {what} channels first ≠ another order"
            );
        }
        let single = conv2d_on!(
            f32,
            (Batch, Chan, Row, Col),
            (Batch, Row, Col, Maps),
            device,
            &case,
            &x,
            &f,
            &g
        );
        for (k, what) in ["values", "input gradient", "filter gradient"]
            .iter()
            .enumerate()
        {
            let error = worst_error(&single[k], &want[k]);
            assert!(
                error <= 1e-5,
                "case {n} {case:?} on {device}: f32 {what} off by {error:e}"
            );
        }
    }
    cases
}

/// Grouped 2-D convolutions on `device`: an input over (Batch, Group, Chan, Row, Col) and a
/// filter over (Group, Maps, Chan, KRow, KCol) — the Group axis, which both have, pairs each
/// group's channels with its own filters — against each group's nested loops (values and
/// both gradients, f64, error ≤ 1e-12), the input given channels last. Returns the number of
/// cases.
pub fn grouped_convolutions(device: &Device, cases: usize) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let cpu = Device::Cpu;
    for n in 0..cases {
        let groups = rng.random_range(1..=3);
        let case = ConvCase {
            batch: rng.random_range(1..=2),
            chans: rng.random_range(1..=2),
            maps: rng.random_range(1..=2),
            win: [
                Win::NONE,
                Win::random(&mut rng, true),
                Win::random(&mut rng, true),
            ],
        };
        let [_, h, w] = case.win;
        // Each group's operands and reference, concatenated group after group.
        let (mut x, mut f, mut g) = (Vec::new(), Vec::new(), Vec::new());
        let mut want: [Vec<f64>; 3] = Default::default();
        for _ in 0..groups {
            let xg = random_values(&mut rng, case.input_count());
            let fg = random_values(&mut rng, case.filter_count());
            let gg = random_values(&mut rng, case.out_count());
            for (all, part) in want.iter_mut().zip(case.reference(&xg, &fg, &gg)) {
                all.extend(part);
            }
            x.extend(xg);
            f.extend(fg);
            g.extend(gg);
        }
        let lens = (
            Group.len(groups),
            Batch.len(case.batch),
            Chan.len(case.chans),
            Row.len(h.len),
            Col.len(w.len),
        );
        let x = Tensor::<f64, (Group, Batch, Chan, Row, Col)>::from_vec(lens, x).unwrap();
        let x = x
            .axes_with_order::<(Batch, Row, Col, Group, Chan)>()
            .contiguous()
            .unwrap();
        let flens = (
            Group.len(groups),
            Maps.len(case.maps),
            Chan.len(case.chans),
            KRow.len(h.kernel),
            KCol.len(w.kernel),
        );
        let f = Tensor::<f64, (Group, Maps, Chan, KRow, KCol)>::from_vec(flens, f).unwrap();
        let glens = (
            Group.len(groups),
            Batch.len(case.batch),
            Maps.len(case.maps),
            Row.len(h.out()),
            Col.len(w.out()),
        );
        let g = Tensor::<f64, (Group, Batch, Maps, Row, Col)>::from_vec(glens, g).unwrap();
        let tape = Tape::<f64>::new();
        let xv = tape.var(x.to(device).unwrap());
        let fv = tape.var(f.to(device).unwrap());
        let y = case.options().run_var(&xv, &fv).unwrap();
        let gv = tape.constant(
            g.axes_with_order::<(Batch, Row, Col, Group, Maps)>()
                .to(device)
                .unwrap(),
        );
        let grads = (&y * &gv)
            .sum::<(Batch, Row, Col, Group, Maps)>()
            .unwrap()
            .backward()
            .unwrap();
        let got = [
            (y.value().to(&cpu).unwrap()).to_vec_in::<(Group, Batch, Maps, Row, Col)>(),
            (grads.get(&xv).unwrap().to(&cpu).unwrap())
                .to_vec_in::<(Group, Batch, Chan, Row, Col)>(),
            (grads.get(&fv).unwrap().to(&cpu).unwrap())
                .to_vec_in::<(Group, Maps, Chan, KRow, KCol)>(),
        ];
        for (k, what) in ["values", "input gradient", "filter gradient"]
            .iter()
            .enumerate()
        {
            let error = worst_error(&got[k], &want[k]);
            assert!(
                error <= 1e-12,
                "case {n} {case:?}, {groups} groups on {device}: {what} off by {error:e}"
            );
        }
    }
    cases
}

/// A pooling case: batch, channels and three windows (Depth, Height, Width).
#[derive(Clone, Copy, Debug)]
struct PoolCase {
    batch: usize,
    chans: usize,
    win: [Win; 3],
}

impl PoolCase {
    fn input_count(&self) -> usize {
        self.batch * self.chans * self.win.iter().map(|w| w.len).product::<usize>()
    }
    fn out_count(&self) -> usize {
        self.batch * self.chans * self.win.iter().map(|w| w.out()).product::<usize>()
    }

    /// The reference pooling (max: padding −∞, the gradient to the first largest in window
    /// order; mean: padding counted), and the input's gradient of `Σ y·g`, over
    /// (B, C, D, H, W) row-major.
    fn reference(&self, max: bool, x: &[f64], g: &[f64]) -> [Vec<f64>; 2] {
        let [d, h, w] = self.win;
        let size = (d.kernel * h.kernel * w.kernel) as f64;
        let mut y = vec![0.0; self.out_count()];
        let mut dx = vec![0.0; x.len()];
        let planes = self.batch * self.chans;
        for bc in 0..planes {
            for (pd, ph, pw) in grid(d.out(), h.out(), w.out()) {
                let o = ((bc * d.out() + pd) * h.out() + ph) * w.out() + pw;
                let mut best: Option<(f64, Option<usize>)> = None;
                let mut sum = 0.0;
                for (rd, rh, rw) in grid(d.kernel, h.kernel, w.kernel) {
                    let at = match (d.at(pd, rd), h.at(ph, rh), w.at(pw, rw)) {
                        (Some(i), Some(j), Some(k)) => {
                            Some(((bc * d.len + i) * h.len + j) * w.len + k)
                        }
                        _ => None,
                    };
                    let v = at.map_or(if max { f64::NEG_INFINITY } else { 0.0 }, |i| x[i]);
                    sum += v;
                    if best.is_none_or(|(b, _)| v > b) {
                        best = Some((v, at));
                    }
                    if !max && let Some(i) = at {
                        dx[i] += g[o] / size;
                    }
                }
                let (b, at) = best.expect("a window has elements");
                y[o] = if max { b } else { sum / size };
                if max && let Some(i) = at {
                    dx[i] += g[o];
                }
            }
        }
        [y, dx]
    }

    fn options(&self, max: bool) -> Pool {
        let mut pool = if max { Pool::max(1) } else { Pool::mean(1) };
        for (role, w) in [SpatialRole::Depth, SpatialRole::Height, SpatialRole::Width]
            .into_iter()
            .zip(self.win)
        {
            pool = pool
                .kernel_along(role, w.kernel)
                .stride_along(role, w.stride)
                .padding_along(role, w.padding);
        }
        pool
    }
}

/// A 2-D pooling on `$device`, taped, the input in the axis order `$order`: `[y, dx]` in
/// (B, C, H, W) order.
macro_rules! pool2d_on {
    ($t:ty, $order:ty, $device:expr, $case:expr, $max:expr, $x:expr, $g:expr) => {{
        let (device, case): (&Device, &PoolCase) = ($device, $case);
        let [_, h, w] = case.win;
        let cast = |v: &[f64]| v.iter().map(|&v| <$t>::from_f64(v)).collect::<Vec<$t>>();
        let lens = (
            Batch.len(case.batch),
            Chan.len(case.chans),
            Row.len(h.len),
            Col.len(w.len),
        );
        let x = Tensor::<$t, (Batch, Chan, Row, Col)>::from_vec(lens, cast($x)).unwrap();
        let x = (x
            .axes_with_order::<$order>()
            .contiguous()
            .unwrap()
            .to(device))
        .unwrap();
        let tape = Tape::<$t>::new();
        let xv = tape.var(x);
        let y = case.options($max).run_var(&xv).unwrap();
        let glens = (
            Batch.len(case.batch),
            Chan.len(case.chans),
            Row.len(h.out()),
            Col.len(w.out()),
        );
        let g = Tensor::<$t, (Batch, Chan, Row, Col)>::from_vec(glens, cast($g)).unwrap();
        let g = tape.constant(
            g.axes_with_order::<$order>()
                .contiguous()
                .unwrap()
                .to(device)
                .unwrap(),
        );
        let grads = (&y * &g).sum::<$order>().unwrap().backward().unwrap();
        let host = |v: Vec<$t>| v.into_iter().map(Into::into).collect::<Vec<f64>>();
        let cpu = Device::Cpu;
        let dx = grads.get(&xv).unwrap();
        [
            host(
                y.value()
                    .to(&cpu)
                    .unwrap()
                    .to_vec_in::<(Batch, Chan, Row, Col)>(),
            ),
            host(dx.to(&cpu).unwrap().to_vec_in::<(Batch, Chan, Row, Col)>()),
        ]
    }};
}

/// 2-D max and mean pooling on `device` against the nested loops: values and the input's
/// gradient in f64 (≤ 1e-12) and f32 (≤ 1e-5), with ties (inputs rounded to a few values),
/// strides 1–2 and padding; channels first, last and another order give the same bits.
pub fn poolings(device: &Device, cases: usize) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for n in 0..cases {
        let win = |rng: &mut ChaCha8Rng| {
            let kernel = rng.random_range(1..=3);
            let len = rng.random_range(kernel.max(2)..=9);
            Win {
                len,
                kernel,
                stride: rng.random_range(1..=2),
                padding: rng.random_range(0..=kernel / 2),
                dilation: 1,
            }
        };
        let (h, w) = (win(&mut rng), win(&mut rng));
        let case = PoolCase {
            batch: rng.random_range(1..=2),
            chans: rng.random_range(1..=3),
            win: [Win::NONE, h, w],
        };
        let max = n % 2 == 0;
        // Few distinct values, so that windows hold ties.
        let x: Vec<f64> = (0..case.input_count())
            .map(|_| f64::from(rng.random_range(-3i8..=3)) / 4.0)
            .collect();
        let g = random_values(&mut rng, case.out_count());
        let want = case.reference(max, &x, &g);
        let first = pool2d_on!(f64, (Batch, Chan, Row, Col), device, &case, max, &x, &g);
        let last = pool2d_on!(f64, (Batch, Row, Col, Chan), device, &case, max, &x, &g);
        let other = pool2d_on!(f64, (Col, Batch, Chan, Row), device, &case, max, &x, &g);
        let single = pool2d_on!(f32, (Batch, Chan, Row, Col), device, &case, max, &x, &g);
        for (k, what) in ["values", "input gradient"].iter().enumerate() {
            let error = worst_error(&first[k], &want[k]);
            assert!(
                error <= 1e-12,
                "case {n} {case:?} max {max} on {device}: {what} off by {error:e}"
            );
            assert_eq!(
                first[k], last[k],
                "case {n} {case:?}: {what} channels first ≠ last"
            );
            assert_eq!(
                first[k], other[k],
                "case {n} {case:?}: {what} first ≠ another order"
            );
            let error = worst_error(&single[k], &want[k]);
            assert!(
                error <= 1e-5,
                "case {n} {case:?} on {device}: f32 {what} off by {error:e}"
            );
        }
    }
    cases
}

/// 1-D and 3-D convolutions and poolings on `device` against the nested loops (f64, values
/// and gradients, ≤ 1e-12): the dimension follows the filter's (or the input's) spatial roles.
pub fn one_and_three_dimensions(device: &Device) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let cpu = Device::Cpu;
    for n in 0..6 {
        // 1-D: (Batch, Chan, Col) with a filter (Maps, Chan, KCol).
        let case = ConvCase {
            batch: rng.random_range(1..=2),
            chans: rng.random_range(1..=3),
            maps: rng.random_range(1..=3),
            win: [Win::NONE, Win::NONE, Win::random(&mut rng, true)],
        };
        let w = case.win[2];
        let x = random_values(&mut rng, case.input_count());
        let f = random_values(&mut rng, case.filter_count());
        let g = random_values(&mut rng, case.out_count());
        let want = case.reference(&x, &f, &g);
        let tape = Tape::<f64>::new();
        let lens = (Batch.len(case.batch), Chan.len(case.chans), Col.len(w.len));
        let xv = tape.var(
            Tensor::<f64, (Batch, Chan, Col)>::from_vec(lens, x)
                .unwrap()
                .to(device)
                .unwrap(),
        );
        let flens = (
            Maps.len(case.maps),
            Chan.len(case.chans),
            KCol.len(w.kernel),
        );
        let fv = tape.var(
            Tensor::<f64, (Maps, Chan, KCol)>::from_vec(flens, f)
                .unwrap()
                .to(device)
                .unwrap(),
        );
        let y = case.options().run_var(&xv, &fv).unwrap();
        let glens = (Batch.len(case.batch), Maps.len(case.maps), Col.len(w.out()));
        let gt = Tensor::<f64, (Batch, Maps, Col)>::from_vec(glens, g).unwrap();
        let gv = tape.constant(
            gt.axes_with_order::<(Batch, Col, Maps)>()
                .to(device)
                .unwrap(),
        );
        let grads = (&y * &gv)
            .sum::<(Batch, Col, Maps)>()
            .unwrap()
            .backward()
            .unwrap();
        let got = [
            y.value()
                .to(&cpu)
                .unwrap()
                .to_vec_in::<(Batch, Maps, Col)>(),
            grads.get(&xv).unwrap().to(&cpu).unwrap().to_vec(),
            grads.get(&fv).unwrap().to(&cpu).unwrap().to_vec(),
        ];
        for k in 0..3 {
            let error = worst_error(&got[k], &want[k]);
            assert!(
                error <= 1e-12,
                "1-D case {n} {case:?} on {device}: part {k} off by {error:e}"
            );
        }

        // 3-D: (Batch, Chan, Dep, Row, Col) with a filter (Maps, Chan, KDep, KRow, KCol).
        let small = |rng: &mut ChaCha8Rng| {
            let mut w = Win::random(rng, true);
            w.len = w.len.min(w.dilation * (w.kernel - 1) + 3);
            w
        };
        let case = ConvCase {
            batch: 1,
            chans: rng.random_range(1..=2),
            maps: rng.random_range(1..=2),
            win: [small(&mut rng), small(&mut rng), small(&mut rng)],
        };
        let [d, h, w] = case.win;
        let x = random_values(&mut rng, case.input_count());
        let f = random_values(&mut rng, case.filter_count());
        let g = random_values(&mut rng, case.out_count());
        let want = case.reference(&x, &f, &g);
        let tape = Tape::<f64>::new();
        let lens = (
            Batch.len(1),
            Chan.len(case.chans),
            Dep.len(d.len),
            Row.len(h.len),
            Col.len(w.len),
        );
        let xv = tape.var(
            Tensor::<f64, (Batch, Chan, Dep, Row, Col)>::from_vec(lens, x)
                .unwrap()
                .to(device)
                .unwrap(),
        );
        let flens = (
            Maps.len(case.maps),
            Chan.len(case.chans),
            KDep.len(d.kernel),
            KRow.len(h.kernel),
            KCol.len(w.kernel),
        );
        let fv = tape.var(
            Tensor::<f64, (Maps, Chan, KDep, KRow, KCol)>::from_vec(flens, f)
                .unwrap()
                .to(device)
                .unwrap(),
        );
        let y = case.options().run_var(&xv, &fv).unwrap();
        let glens = (
            Batch.len(1),
            Maps.len(case.maps),
            Dep.len(d.out()),
            Row.len(h.out()),
            Col.len(w.out()),
        );
        type Out3 = (Batch, Dep, Row, Col, Maps);
        let gt = Tensor::<f64, (Batch, Maps, Dep, Row, Col)>::from_vec(glens, g).unwrap();
        let gv = tape.constant(gt.axes_with_order::<Out3>().to(device).unwrap());
        let grads = (&y * &gv).sum::<Out3>().unwrap().backward().unwrap();
        let got = [
            y.value()
                .to(&cpu)
                .unwrap()
                .to_vec_in::<(Batch, Maps, Dep, Row, Col)>(),
            grads.get(&xv).unwrap().to(&cpu).unwrap().to_vec(),
            grads.get(&fv).unwrap().to(&cpu).unwrap().to_vec(),
        ];
        for k in 0..3 {
            let error = worst_error(&got[k], &want[k]);
            assert!(
                error <= 1e-12,
                "3-D case {n} {case:?} on {device}: part {k} off by {error:e}"
            );
        }

        // 3-D pooling, max and mean.
        let case = PoolCase {
            batch: 1,
            chans: 2,
            win: case.win.map(|w| Win {
                dilation: 1,
                padding: w.padding.min(w.kernel / 2),
                ..w
            }),
        };
        let [d, h, w] = case.win;
        for max in [true, false] {
            let x = random_values(&mut rng, case.input_count());
            let g = random_values(&mut rng, case.out_count());
            let want = case.reference(max, &x, &g);
            let tape = Tape::<f64>::new();
            let lens = (
                Batch.len(1),
                Chan.len(2),
                Dep.len(d.len),
                Row.len(h.len),
                Col.len(w.len),
            );
            let xv = tape.var(
                Tensor::<f64, (Batch, Chan, Dep, Row, Col)>::from_vec(lens, x)
                    .unwrap()
                    .to(device)
                    .unwrap(),
            );
            let y = case.options(max).run_var(&xv).unwrap();
            let glens = (
                Batch.len(1),
                Chan.len(2),
                Dep.len(d.out()),
                Row.len(h.out()),
                Col.len(w.out()),
            );
            type In3 = (Batch, Chan, Dep, Row, Col);
            let gv = tape.constant(
                Tensor::<f64, In3>::from_vec(glens, g)
                    .unwrap()
                    .to(device)
                    .unwrap(),
            );
            let grads = (&y * &gv).sum::<In3>().unwrap().backward().unwrap();
            let got = [
                y.value().to(&cpu).unwrap().to_vec(),
                grads.get(&xv).unwrap().to(&cpu).unwrap().to_vec(),
            ];
            for k in 0..2 {
                let error = worst_error(&got[k], &want[k]);
                assert!(
                    error <= 1e-12,
                    "3-D pool {n} {case:?} max {max} on {device}: part {k} off by {error:e}"
                );
            }
        }
    }
}

/// The gradients of a convolution (stride 2, padding 1, dilation 2 along Height; stride 1,
/// padding 2 along Width), a max pooling and a mean pooling on `device` (f64) against central
/// finite differences of the device's own forward: the largest error relative to
/// `1 + |gradient|` (below 1e-7).
pub fn finite_differences(device: &Device) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let conv = Convolution::new()
        .stride_along(SpatialRole::Height, 2)
        .dilation_along(SpatialRole::Height, 2)
        .padding_along(SpatialRole::Height, 1)
        .padding_along(SpatialRole::Width, 2);
    let lens = (Batch.len(2), Chan.len(2), Row.len(7), Col.len(5));
    let flens = (Maps.len(2), Chan.len(2), KRow.len(2), KCol.len(3));
    let x: Vec<f64> = random_values(&mut rng, 2 * 2 * 7 * 5);
    let f: Vec<f64> = random_values(&mut rng, 2 * 2 * 2 * 3);
    type In = (Batch, Chan, Row, Col);
    type Filter = (Maps, Chan, KRow, KCol);
    let input = |v: &[f64]| {
        Tensor::<f64, In>::from_vec(lens, v.to_vec())
            .unwrap()
            .to(device)
            .unwrap()
    };
    let filter = |v: &[f64]| {
        Tensor::<f64, Filter>::from_vec(flens, v.to_vec())
            .unwrap()
            .to(device)
            .unwrap()
    };
    let out_lens = (Batch.len(2), Row.len(4), Col.len(7), Maps.len(2));
    let weights =
        Tensor::<f64, (Batch, Row, Col, Maps)>::random_uniform(out_lens, -1.0, 1.0, 3).unwrap();
    let weights = weights.to(device).unwrap();
    let loss = |x: &[f64], f: &[f64]| -> f64 {
        let y = conv.run(&input(x), &filter(f)).unwrap();
        (&y * &weights)
            .eval()
            .unwrap()
            .sum::<(Batch, Row, Col, Maps)>()
            .unwrap()
            .to(&Device::Cpu)
            .unwrap()
            .to_vec()[0]
    };
    let tape = Tape::<f64>::new();
    let (xv, fv) = (tape.var(input(&x)), tape.var(filter(&f)));
    let y = conv.run_var(&xv, &fv).unwrap();
    let grads = (&y * &tape.constant(weights.clone()))
        .sum::<(Batch, Row, Col, Maps)>()
        .unwrap()
        .backward()
        .unwrap();
    let (dx, df) = (
        grads.get(&xv).unwrap().to(&Device::Cpu).unwrap().to_vec(),
        grads.get(&fv).unwrap().to(&Device::Cpu).unwrap().to_vec(),
    );
    let step = 1e-6;
    let mut worst = 0.0f64;
    let moved = |v: &[f64], i: usize, by: f64| {
        let mut v = v.to_vec();
        v[i] += by;
        v
    };
    for (i, &g) in dx.iter().enumerate() {
        let numeric =
            (loss(&moved(&x, i, step), &f) - loss(&moved(&x, i, -step), &f)) / (2.0 * step);
        worst = worst.max((numeric - g).abs() / (1.0 + g.abs()));
    }
    for (i, &g) in df.iter().enumerate() {
        let numeric =
            (loss(&x, &moved(&f, i, step)) - loss(&x, &moved(&f, i, -step))) / (2.0 * step);
        worst = worst.max((numeric - g).abs() / (1.0 + g.abs()));
    }
    // Poolings (distinct values, so that the maximum is differentiable).
    for pool in [
        Pool::max(3).stride(2).padding(1),
        Pool::mean(2).stride(1).padding(1),
    ] {
        let pooled_lens = if pool.op() == axes::spatial::PoolOp::Max {
            (4, 3)
        } else {
            (8, 6)
        };
        let wl = (
            Batch.len(2),
            Chan.len(2),
            Row.len(pooled_lens.0),
            Col.len(pooled_lens.1),
        );
        let weights = Tensor::<f64, In>::random_uniform(wl, -1.0, 1.0, 4)
            .unwrap()
            .to(device)
            .unwrap();
        let loss = |x: &[f64]| -> f64 {
            let y = pool.run(&input(x)).unwrap();
            (&y * &weights)
                .eval()
                .unwrap()
                .sum::<In>()
                .unwrap()
                .to(&Device::Cpu)
                .unwrap()
                .to_vec()[0]
        };
        let tape = Tape::<f64>::new();
        let xv = tape.var(input(&x));
        let y = pool.run_var(&xv).unwrap();
        let grads = (&y * &tape.constant(weights.clone()))
            .sum::<In>()
            .unwrap()
            .backward()
            .unwrap();
        let dx = grads.get(&xv).unwrap().to(&Device::Cpu).unwrap().to_vec();
        for (i, &g) in dx.iter().enumerate() {
            let numeric = (loss(&moved(&x, i, step)) - loss(&moved(&x, i, -step))) / (2.0 * step);
            worst = worst.max((numeric - g).abs() / (1.0 + g.abs()));
        }
    }
    assert!(
        worst <= 1e-7,
        "gradients on {device} off finite differences by {worst:e}"
    );
    worst
}
