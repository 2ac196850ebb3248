//! Tensors against a plain reference: constructors, named get/set, export in any order,
//! equality by axis name, `Display`, and every constructor error. Shapes are random
//! (including length 0 and 1), and every order of the axes is exercised.

use axes::prelude::*;
use axes::{Error, Layout, Storage};
use half::{bf16, f16};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Axis)]
struct I;
#[derive(Axis)]
struct J;
#[derive(Axis)]
struct K;
#[derive(Axis)]
#[axis(len = 3)]
struct Rgb;

/// Random lengths in 0..=4 (so 0 and 1 occur often).
fn random_lens(rng: &mut ChaCha8Rng) -> [usize; 3] {
    [
        rng.random_range(0..=4),
        rng.random_range(0..=4),
        rng.random_range(0..=4),
    ]
}

/// Row-major position of `index` in a buffer with `lens`, both in the same axis order.
fn row_major_pos(lens: &[usize], index: &[usize]) -> usize {
    lens.iter()
        .zip(index)
        .fold(0, |pos, (len, i)| pos * len + i)
}

/// Element of the reference data at a named position (i, j, k), when the data is row-major in
/// the written order `order` (a permutation of I=0, J=1, K=2).
fn reference(data: &[f64], lens: [usize; 3], order: [usize; 3], ijk: [usize; 3]) -> f64 {
    let written_lens = order.map(|a| lens[a]);
    let written_index = order.map(|a| ijk[a]);
    data[row_major_pos(&written_lens, &written_index)]
}

/// All (i, j, k) in row-major order of the axis order `order`.
fn all_positions(lens: [usize; 3], order: [usize; 3]) -> Vec<[usize; 3]> {
    let mut out = Vec::new();
    for a in 0..lens[order[0]] {
        for b in 0..lens[order[1]] {
            for c in 0..lens[order[2]] {
                let mut ijk = [0; 3];
                ijk[order[0]] = a;
                ijk[order[1]] = b;
                ijk[order[2]] = c;
                out.push(ijk);
            }
        }
    }
    out
}

fn len_of(axis: usize, lens: [usize; 3]) -> usize {
    lens[axis]
}

/// Builds a tensor of type order `$T` from data written in order `$W`, then checks get, set,
/// to_vec in every order, and equality against the reference.
macro_rules! check_orders {
    ($rng:expr, ($($t:ident),*) = [$($ti:expr),*], written ($($w:ident),*) = [$($wi:expr),*]) => {{
        let lens = random_lens($rng);
        let count = lens.iter().product::<usize>();
        let data: Vec<f64> = (0..count).map(|_| $rng.random_range(-100..100) as f64).collect();
        let order = [$($wi),*];
        let x = Tensor::<f64, ($($t,)*)>::from_vec(($($w.len(len_of($wi, lens)),)*), data.clone())?;
        assert_eq!(x.lens(), [$(lens[$ti]),*]);
        // from_vec never copies: the tensor views the given buffer.
        assert_eq!(x.storage().as_slice(), &data[..]);
        // get by named index, written in yet another order
        for ijk in all_positions(lens, [0, 1, 2]) {
            let got = x.get((K.at(ijk[2]), I.at(ijk[0]), J.at(ijk[1])))?;
            assert_eq!(got, reference(&data, lens, order, ijk));
        }
        // export in every order
        for (export, vec) in [
            ([0, 1, 2], x.to_vec_in::<(I, J, K)>()),
            ([0, 2, 1], x.to_vec_in::<(I, K, J)>()),
            ([1, 0, 2], x.to_vec_in::<(J, I, K)>()),
            ([1, 2, 0], x.to_vec_in::<(J, K, I)>()),
            ([2, 0, 1], x.to_vec_in::<(K, I, J)>()),
            ([2, 1, 0], x.to_vec_in::<(K, J, I)>()),
        ] {
            let expected: Vec<f64> = all_positions(lens, export)
                .into_iter()
                .map(|ijk| reference(&data, lens, order, ijk))
                .collect();
            assert_eq!(vec, expected, "export order {export:?}");
        }
        // equality with the same values in another storage order
        let y = Tensor::<f64, (K, J, I)>::from_fn((I.len(lens[0]), J.len(lens[1]), K.len(lens[2])), |ix| {
            reference(&data, lens, order, [ix.of::<I>(), ix.of::<J>(), ix.of::<K>()])
        })?;
        assert_eq!(x, y);
        // set: one element changes, in this tensor only
        if count > 0 {
            let ijk = [$rng.random_range(0..lens[0]), $rng.random_range(0..lens[1]), $rng.random_range(0..lens[2])];
            let mut z = x.clone();
            z.set((J.at(ijk[1]), K.at(ijk[2]), I.at(ijk[0])), 1000.0)?;
            assert_eq!(z.get((I.at(ijk[0]), J.at(ijk[1]), K.at(ijk[2])))?, 1000.0);
            assert_ne!(x, z);
            assert_eq!(x, y, "a write through a clone must not show in the original");
        }
    }};
}

#[test]
fn every_type_order_and_written_order_against_the_reference() -> axes::Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..20 {
        check_orders!(
            &mut rng,
            (I, J, K) = [0, 1, 2],
            written(I, J, K) = [0, 1, 2]
        );
        check_orders!(
            &mut rng,
            (I, J, K) = [0, 1, 2],
            written(K, I, J) = [2, 0, 1]
        );
        check_orders!(
            &mut rng,
            (J, K, I) = [1, 2, 0],
            written(I, J, K) = [0, 1, 2]
        );
        check_orders!(
            &mut rng,
            (K, J, I) = [2, 1, 0],
            written(J, I, K) = [1, 0, 2]
        );
        check_orders!(
            &mut rng,
            (I, K, J) = [0, 2, 1],
            written(K, J, I) = [2, 1, 0]
        );
        check_orders!(
            &mut rng,
            (J, I, K) = [1, 0, 2],
            written(I, K, J) = [0, 2, 1]
        );
    }
    Ok(())
}

#[test]
fn full_zeros_ones_for_every_element_type() -> axes::Result<()> {
    fn check<T: Element>(value: T) -> axes::Result<()> {
        let shape = (J.len(3), I.len(2));
        assert!(
            Tensor::<T, (I, J)>::zeros(shape)?
                .to_vec()
                .iter()
                .all(|&v| v == T::zero())
        );
        assert!(
            Tensor::<T, (I, J)>::ones(shape)?
                .to_vec()
                .iter()
                .all(|&v| v == T::one())
        );
        let full = Tensor::<T, (I, J)>::full(shape, value)?;
        assert_eq!(full.to_vec(), vec![value; 6]);
        assert_eq!(full.element_count(), 6);
        Ok(())
    }
    check(2.5f32)?;
    check(2.5f64)?;
    check(f16::from_f32(2.5))?;
    check(bf16::from_f32(2.5))?;
    check(-7i32)?;
    check(-7i64)?;
    check(200u8)?;
    check(true)
}

#[test]
fn scalars_have_no_axes() -> axes::Result<()> {
    let mut s = Tensor::<i32, ()>::full((), 4)?;
    assert_eq!(s.get(())?, 4);
    s.set((), 5)?;
    assert_eq!(s.to_vec(), [5]);
    assert_eq!(s.to_string(), "Tensor<i32, ()>\n5");
    Ok(())
}

#[test]
fn named_index_out_of_range_names_axis_index_and_length() -> axes::Result<()> {
    let mut x = Tensor::<f32, (I, J)>::zeros((I.len(2), J.len(3)))?;
    let err = x.get((I.at(1), J.at(3))).unwrap_err();
    assert_eq!(
        err,
        Error::IndexOutOfRange {
            axis: "J".into(),
            index: 3,
            len: 3
        }
    );
    assert_eq!(
        err.to_string(),
        "index 3 is out of range for axis `J` of length 3"
    );
    assert!(matches!(
        x.set((J.at(0), I.at(2)), 1.0),
        Err(Error::IndexOutOfRange {
            index: 2,
            len: 2,
            ..
        })
    ));
    let empty = Tensor::<f32, (I, J)>::zeros((I.len(0), J.len(3)))?;
    assert!(matches!(
        empty.get((I.at(0), J.at(0))),
        Err(Error::IndexOutOfRange { len: 0, .. })
    ));
    Ok(())
}

#[test]
fn wrong_element_count_names_the_lengths() {
    let err = Tensor::<u8, (I, J)>::from_vec((J.len(3), I.len(2)), vec![0; 5]).unwrap_err();
    assert_eq!(
        err,
        Error::ElementCount {
            lengths: "I=2, J=3".into(),
            expected: 6,
            got: 5
        }
    );
    assert_eq!(
        err.to_string(),
        "5 elements were given, but the lengths (I=2, J=3) need 6"
    );
}

#[test]
fn fixed_length_axes_are_checked() -> axes::Result<()> {
    assert_eq!(
        Tensor::<f32, (I, Rgb)>::zeros((I.len(2), Rgb.len(3)))?.lens(),
        [2, 3]
    );
    let err = Tensor::<f32, (I, Rgb)>::zeros((I.len(2), Rgb.len(4))).unwrap_err();
    assert_eq!(
        err,
        Error::FixedLength {
            axis: "Rgb".into(),
            fixed: 3,
            got: 4
        }
    );
    assert_eq!(
        err.to_string(),
        "axis `Rgb` has the fixed length 3, but length 4 was given"
    );
    let err = Tensor::<f32, (Dual<Rgb>,)>::zeros(Len::<Dual<Rgb>>::new(2)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "axis `Dual<Rgb>` has the fixed length 3, but length 2 was given"
    );
    Ok(())
}

#[test]
fn element_counts_that_overflow_are_errors() {
    let huge = usize::MAX / 2;
    let err = Tensor::<f32, (I, J, K)>::zeros((I.len(huge), J.len(huge), K.len(0)));
    // zero elements: fine, whatever the other lengths
    assert!(err.is_ok());
    let err = Tensor::<f32, (I, J)>::zeros((I.len(huge), J.len(3))).unwrap_err();
    assert!(matches!(&err, Error::SizeOverflow { lengths } if lengths.contains("I=")));
    let err = Tensor::<u8, (I,)>::zeros(I.len(isize::MAX as usize + 1)).unwrap_err();
    assert!(matches!(err, Error::SizeOverflow { .. }));
}

#[test]
fn random_fills_are_seeded_and_in_range() -> axes::Result<()> {
    let shape = (I.len(40), J.len(25));
    let a = Tensor::<f64, (I, J)>::random_uniform(shape, -2.0, 3.0, 11)?;
    assert_eq!(
        a,
        Tensor::<f64, (J, I)>::random_uniform(shape, -2.0, 3.0, 11)?
    );
    assert_ne!(
        a,
        Tensor::<f64, (I, J)>::random_uniform(shape, -2.0, 3.0, 12)?
    );
    let values = a.to_vec();
    assert!(values.iter().all(|v| (-2.0..3.0).contains(v)));
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    assert!((mean - 0.5).abs() < 0.3, "mean {mean}");

    let dice = Tensor::<i32, (I, J)>::random_uniform(shape, 1, 7, 5)?.to_vec();
    assert!(dice.iter().all(|v| (1..7).contains(v)));
    assert!(
        (1..7).all(|face| dice.contains(&face)),
        "every face appears in 1000 throws"
    );

    let err = Tensor::<f32, (I,)>::random_uniform(I.len(3), 1.0, 1.0, 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot draw values from the empty or invalid range [1, 1)"
    );
    assert!(Tensor::<f32, (I,)>::random_uniform(I.len(3), f32::NAN, 1.0, 0).is_err());
    Ok(())
}

#[test]
fn display_shows_axis_names_lengths_and_values() -> axes::Result<()> {
    let x = Tensor::<i64, (I, J, K)>::from_fn((I.len(2), J.len(2), K.len(2)), |ix| {
        (100 * ix.of::<I>() + 10 * ix.of::<J>() + ix.of::<K>()) as i64
    })?;
    assert_eq!(
        x.to_string(),
        "Tensor<i64, (I=2, J=2, K=2)>\n[[[0, 1],\n  [10, 11]],\n [[100, 101],\n  [110, 111]]]"
    );
    let long = Tensor::<u8, (I,)>::from_fn(I.len(20), |ix| ix.of::<I>() as u8)?;
    assert_eq!(
        long.to_string(),
        "Tensor<u8, (I=20)>\n[0, 1, 2, ..., 17, 18, 19]"
    );
    let empty = Tensor::<f32, (I, J)>::zeros((I.len(0), J.len(2)))?;
    assert_eq!(empty.to_string(), "Tensor<f32, (I=0, J=2)>\n[]");
    assert_eq!(
        format!(
            "{:?}",
            Tensor::<bool, (Dual<I>,)>::ones(Len::<Dual<I>>::new(2))?
        ),
        "Tensor<bool, (Dual<I>=2)>\n[true, true]"
    );
    Ok(())
}

#[test]
fn equality_is_by_axis_name_not_position() -> axes::Result<()> {
    // Two equal-length axes: swapping them changes the tensor.
    let x = Tensor::<i32, (I, J)>::from_vec((I.len(2), J.len(2)), vec![1, 2, 3, 4])?;
    let same = Tensor::<i32, (J, I)>::from_vec((J.len(2), I.len(2)), vec![1, 3, 2, 4])?;
    let swapped = Tensor::<i32, (J, I)>::from_vec((J.len(2), I.len(2)), vec![1, 2, 3, 4])?;
    assert_eq!(x, same);
    assert_ne!(x, swapped);
    Ok(())
}

#[test]
fn layouts_outside_their_buffer_are_rejected() {
    let storage = Storage::new(vec![0.0f32; 6]);
    let fits = Layout::new(&[2, 3], &[3, 1], 0, storage.len()).unwrap();
    assert!(Tensor::<f32, (I, J)>::from_parts(storage.clone(), fits).is_some());
    // wrong rank for the type
    assert!(Tensor::<f32, (I,)>::from_parts(storage.clone(), fits).is_none());
    // reaches past the end, or before the start
    assert!(Layout::new(&[2, 3], &[3, 1], 1, 6).is_none());
    assert!(Layout::new(&[2, 3], &[-3, 1], 2, 6).is_none());
    assert!(Layout::new(&[2, 3], &[-3, 1], 3, 6).is_some());
    // empty views reach nothing
    assert!(Layout::new(&[0, 3], &[100, 100], 50, 6).is_some());
    // reversed rows read correctly
    let reversed = Layout::new(&[2, 3], &[-3, 1], 3, 6).unwrap();
    let t = Tensor::<f32, (I, J)>::from_parts(Storage::new(vec![0., 1., 2., 3., 4., 5.]), reversed)
        .unwrap();
    assert_eq!(t.to_vec(), [3., 4., 5., 0., 1., 2.]);
}

#[test]
fn reorders_share_storage() -> axes::Result<()> {
    let x = Tensor::<f32, (I, J, K)>::zeros((I.len(2), J.len(3), K.len(4)))?;
    let y = x.axes_with_order::<(K, I, J)>();
    assert!(y.shares_storage_with(&x));
    assert_eq!(y.layout().strides(), [1, 12, 4]);
    assert_eq!(y.len_of::<J>(), 3);
    Ok(())
}

/// Every buffer the library makes starts on a cache line (the CPU engine's vector loads and
/// streaming stores need it), `from_vec` moves a `Vec` that does not, and `Storage::new`
/// keeps a `Vec` where it is.
#[test]
fn buffers_start_on_a_cache_line() -> axes::Result<()> {
    let on_line = |storage: &Storage<f32>| {
        (storage.as_slice().as_ptr() as usize).is_multiple_of(axes::storage::HOST_ALIGN)
    };
    for n in [1, 7, 1000, 1 << 18] {
        let zeros = Tensor::<f32, (I, J)>::zeros((I.len(n), J.len(2)))?;
        assert!(on_line(zeros.storage()), "zeros of {n}");
        let ones = Tensor::<f32, (I, J)>::full((I.len(n), J.len(2)), 1.5)?;
        assert!(on_line(ones.storage()), "full of {n}");
        let sum = (&zeros + &ones).eval()?;
        assert!(on_line(sum.storage()), "a result of {n}");
        let values: Vec<f32> = (0..2 * n).map(|k| k as f32).collect();
        let off_line = off_a_cache_line(&values);
        let address = off_line.as_ptr();
        let kept = Storage::new(off_line);
        assert_eq!(kept.as_slice().as_ptr(), address);
        assert_eq!(kept.as_slice(), &values[..]);
        let off_line = off_a_cache_line(&values);
        let address = off_line.as_ptr();
        let moved = Tensor::<f32, (I, J)>::from_vec((I.len(n), J.len(2)), off_line)?;
        assert!(on_line(moved.storage()), "from_vec of {n}");
        assert_ne!(moved.storage().as_slice().as_ptr(), address);
        assert_eq!(moved.to_vec(), values);
    }
    Ok(())
}

/// A copy of `values` in a `Vec` that does not start on a cache line (the allocator aligns
/// to 16 bytes: ask until it gives such a place).
fn off_a_cache_line(values: &[f32]) -> Vec<f32> {
    let mut held = Vec::new();
    loop {
        let copy = values.to_vec();
        if !(copy.as_ptr() as usize).is_multiple_of(64) {
            return copy;
        }
        held.push(copy);
    }
}
