//! A plain reference tensor for integration tests: named axes, lengths and row-major `f64`
//! data, with every operation written as index arithmetic on `Vec`s (never through the
//! library's layout code).
#![allow(dead_code, unreachable_pub)]

use axes::prelude::*;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A dense reference tensor: axis names, lengths, and row-major data in that axis order.
#[derive(Clone, Debug, PartialEq)]
pub struct Ref {
    pub names: Vec<String>,
    pub lens: Vec<usize>,
    pub data: Vec<f64>,
}

impl Ref {
    pub fn random(rng: &mut ChaCha8Rng, names: &[&str], max_len: usize) -> Ref {
        let lens: Vec<usize> = names
            .iter()
            .map(|_| rng.random_range(0..=max_len))
            .collect();
        let count = lens.iter().product();
        Ref {
            names: names.iter().map(|n| n.to_string()).collect(),
            lens,
            data: (0..count)
                .map(|_| rng.random_range(1..1000) as f64)
                .collect(),
        }
    }

    /// A reference with the given lengths and random small integers as values.
    pub fn random_with(rng: &mut ChaCha8Rng, names: &[&str], lens: &[usize]) -> Ref {
        let count = lens.iter().product();
        Ref {
            names: names.iter().map(|n| n.to_string()).collect(),
            lens: lens.to_vec(),
            data: (0..count)
                .map(|_| rng.random_range(-9..10) as f64)
                .collect(),
        }
    }

    pub fn axis(&self, name: &str) -> usize {
        self.names.iter().position(|n| n == name).unwrap()
    }

    /// Every index in row-major order.
    pub fn indices(lens: &[usize]) -> Vec<Vec<usize>> {
        let count: usize = lens.iter().product();
        (0..count)
            .map(|mut flat| {
                let mut index = vec![0; lens.len()];
                for axis in (0..lens.len()).rev() {
                    index[axis] = flat % lens[axis];
                    flat /= lens[axis];
                }
                index
            })
            .collect()
    }

    pub fn at(&self, index: &[usize]) -> f64 {
        let pos = index
            .iter()
            .zip(&self.lens)
            .fold(0, |p, (i, len)| p * len + i);
        self.data[pos]
    }

    /// Builds a tensor of the given lengths whose element at each index is `f(index)`.
    pub fn build(names: Vec<String>, lens: Vec<usize>, f: impl Fn(&[usize]) -> f64) -> Ref {
        let data = Ref::indices(&lens).iter().map(|ix| f(ix)).collect();
        Ref { names, lens, data }
    }

    pub fn reorder(&self, names: &[std::borrow::Cow<'static, str>]) -> Ref {
        let from: Vec<usize> = names.iter().map(|n| self.axis(n)).collect();
        let lens = from.iter().map(|&a| self.lens[a]).collect();
        Ref::build(names.iter().map(|n| n.to_string()).collect(), lens, |ix| {
            let mut mine = vec![0; ix.len()];
            for (k, &a) in from.iter().enumerate() {
                mine[a] = ix[k];
            }
            self.at(&mine)
        })
    }

    pub fn broadcast(&self, name: &str, len: usize) -> Ref {
        let mut names = self.names.clone();
        names.push(name.into());
        let mut lens = self.lens.clone();
        lens.push(len);
        Ref::build(names, lens, |ix| self.at(&ix[..ix.len() - 1]))
    }

    pub fn slice(&self, name: &str, start: usize, end: usize, step: isize) -> Ref {
        let a = self.axis(name);
        let picked: Vec<usize> = if step > 0 {
            (start..end).step_by(step as usize).collect()
        } else {
            (start..end).rev().step_by(step.unsigned_abs()).collect()
        };
        let mut lens = self.lens.clone();
        lens[a] = picked.len();
        Ref::build(self.names.clone(), lens, |ix| {
            let mut mine = ix.to_vec();
            mine[a] = picked[ix[a]];
            self.at(&mine)
        })
    }

    pub fn index(&self, name: &str, i: usize) -> Ref {
        let a = self.axis(name);
        let mut names = self.names.clone();
        names.remove(a);
        let mut lens = self.lens.clone();
        lens.remove(a);
        Ref::build(names, lens, |ix| {
            let mut mine = ix.to_vec();
            mine.insert(a, i);
            self.at(&mine)
        })
    }

    pub fn pad(&self, name: &str, before: usize, after: usize) -> Ref {
        let a = self.axis(name);
        let mut lens = self.lens.clone();
        lens[a] += before + after;
        Ref::build(self.names.clone(), lens, |ix| {
            if ix[a] < before || ix[a] >= before + self.lens[a] {
                return 0.0;
            }
            let mut mine = ix.to_vec();
            mine[a] -= before;
            self.at(&mine)
        })
    }

    pub fn rename(&self, names: &[&str]) -> Ref {
        Ref {
            names: names.iter().map(|n| n.to_string()).collect(),
            ..self.clone()
        }
    }
}

impl Ref {
    /// Element-wise `f` of two references, broadcasting by axis name; the result has `self`'s
    /// axes then `other`'s new ones (the order only matters for `reorder`).
    pub fn zip(&self, other: &Ref, f: impl Fn(f64, f64) -> f64) -> Ref {
        let mut names = self.names.clone();
        let mut lens = self.lens.clone();
        for (n, &l) in other.names.iter().zip(&other.lens) {
            if !names.contains(n) {
                names.push(n.clone());
                lens.push(l);
            }
        }
        let pick = |r: &Ref, ix: &[usize]| -> f64 {
            let mine: Vec<usize> = r
                .names
                .iter()
                .map(|n| ix[names.iter().position(|m| m == n).unwrap()])
                .collect();
            r.at(&mine)
        };
        Ref::build(names.clone(), lens, |ix| f(pick(self, ix), pick(other, ix)))
    }

    /// Element-wise `f`.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> Ref {
        Ref {
            data: self.data.iter().map(|&v| f(v)).collect(),
            ..self.clone()
        }
    }

    /// Folds the axes `over` with `f` from `init`, in index order.
    pub fn reduce(&self, over: &[&str], init: f64, f: impl Fn(f64, f64) -> f64) -> Ref {
        let kept: Vec<usize> = (0..self.names.len())
            .filter(|&a| !over.contains(&self.names[a].as_str()))
            .collect();
        let names = kept.iter().map(|&a| self.names[a].clone()).collect();
        let lens: Vec<usize> = kept.iter().map(|&a| self.lens[a]).collect();
        let mut out = Ref::build(names, lens.clone(), |_| init);
        for ix in Ref::indices(&self.lens) {
            let k: Vec<usize> = kept.iter().map(|&a| ix[a]).collect();
            let pos = k.iter().zip(&lens).fold(0, |p, (i, len)| p * len + i);
            out.data[pos] = f(out.data[pos], self.at(&ix));
        }
        out
    }
}

/// Values of `t` (any float type, its own axis order) against `r`, within `rel` relative
/// (or absolute, near zero) tolerance; NaN must match NaN.
#[track_caller]
pub fn assert_close<T: Element, A: AxisSet>(t: &Tensor<T, A>, r: &Ref, rel: f64) {
    let expected = r.reorder(&A::names());
    assert_eq!(t.lens(), &expected.lens[..], "lengths of {:?}", A::names());
    for (k, (got, want)) in t
        .to_vec()
        .into_iter()
        .map(Element::to_f64)
        .zip(&expected.data)
        .enumerate()
    {
        let ok = (got.is_nan() && want.is_nan())
            || got == *want
            || (got - want).abs() <= rel * want.abs().max(1.0);
        assert!(ok, "element {k}: got {got}, want {want} (tolerance {rel})");
    }
}

/// The tensor's values in its own axis order, compared with the reference in that order.
#[track_caller]
pub fn assert_matches<A: AxisSet>(t: &Tensor<f64, A>, r: &Ref) {
    let expected = r.reorder(&A::names());
    assert_eq!(t.lens(), &expected.lens[..], "lengths of {:?}", A::names());
    assert_eq!(t.to_vec(), expected.data, "values of {:?}", A::names());
}
