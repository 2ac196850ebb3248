//! Every view against a reference computed by plain index arithmetic on `Vec`s (not through
//! the library's layout code), over random lengths (0 and 1 included) and chained views,
//! checking values and that no copy happened (same storage, expected strides and offset).

use axes::arena::ArenaBuilder;
use axes::prelude::*;
use axes::{Error, Flat};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod common;
use common::{Ref, assert_matches};

#[derive(Axis)]
struct I;
#[derive(Axis)]
struct J;
#[derive(Axis)]
struct K;
#[derive(Axis)]
struct L;

fn tensor_ij(r: &Ref) -> Tensor<f64, (I, J)> {
    Tensor::from_vec((I.len(r.lens[0]), J.len(r.lens[1])), r.data.clone()).unwrap()
}

/// A random range and nonzero step within `len`.
fn random_slice(rng: &mut ChaCha8Rng, len: usize) -> (usize, usize, isize) {
    let start = rng.random_range(0..=len);
    let end = rng.random_range(start..=len);
    let step = [-3, -2, -1, 1, 2, 3][rng.random_range(0..6)];
    (start, end, step)
}

#[test]
fn reorder_is_a_permuted_view() {
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    for _ in 0..100 {
        let r = Ref::random(&mut rng, &["I", "J"], 5);
        let x = tensor_ij(&r);
        let t = x.axes_with_order::<(J, I)>();
        assert_matches(&t, &r);
        assert!(t.shares_storage_with(&x));
        assert_eq!(t.layout().strides(), [1, r.lens[1].max(1) as isize]);
    }
}

#[test]
fn broadcast_adds_stride_zero_axes_in_any_order() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for _ in 0..100 {
        let r = Ref::random(&mut rng, &["I", "J"], 4);
        let k = rng.random_range(0..4);
        let x = tensor_ij(&r);
        let b = x.broadcast::<(J, K, I)>(K.len(k)).unwrap();
        assert_matches(&b, &r.broadcast("K", k));
        assert!(b.shares_storage_with(&x));
        assert_eq!(b.layout().strides()[1], 0);
        assert_eq!(b.layout().offset(), x.layout().offset());
        let same = x.broadcast::<(J, I)>(()).unwrap();
        assert_matches(&same, &r);
    }
}

#[test]
fn slices_with_every_step_against_the_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    for _ in 0..300 {
        let r = Ref::random(&mut rng, &["I", "J"], 6);
        let x = tensor_ij(&r);
        let (start, end, step) = random_slice(&mut rng, r.lens[1]);
        let s = x.slice::<J>(start..end, step).unwrap();
        assert_matches(&s, &r.slice("J", start, end, step));
        assert!(s.shares_storage_with(&x));
        assert_eq!(s.layout().strides()[1], step);
        // full-range forms
        assert_matches(&x.slice::<I>(.., 1).unwrap(), &r);
        if r.lens[0] > 0 {
            let last = r.lens[0] - 1;
            assert_matches(
                &x.slice::<I>(1..=last, -1).unwrap(),
                &r.slice("I", 1, last + 1, -1),
            );
        }
    }
}

#[test]
fn integer_index_removes_the_axis() {
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for _ in 0..100 {
        let r = Ref::random(&mut rng, &["I", "J"], 5);
        let x = tensor_ij(&r);
        if r.lens[0] == 0 {
            assert!(matches!(
                x.index(I.at(0)),
                Err(Error::IndexOutOfRange { len: 0, .. })
            ));
            continue;
        }
        let i = rng.random_range(0..r.lens[0]);
        let row: Tensor<f64, (J,)> = x.index(I.at(i)).unwrap();
        assert_matches(&row, &r.index("I", i));
        assert!(row.shares_storage_with(&x));
        assert_eq!(row.layout().offset(), i * r.lens[1].max(1));
    }
}

#[test]
fn padding_reads_zeros_through_the_view() {
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    for _ in 0..100 {
        let r = Ref::random(&mut rng, &["I", "J"], 4);
        let (before, after) = (rng.random_range(0..3), rng.random_range(0..3));
        let x = tensor_ij(&r);
        let p = x.pad::<J>(before, after).unwrap();
        let expected = r.pad("J", before, after);
        assert_matches(&p, &expected);
        assert!(p.shares_storage_with(&x));
        assert_eq!(p.storage().len(), r.data.len(), "padding stores nothing");
        // contiguous() materialises it
        let c = p.contiguous().unwrap();
        assert!(!c.shares_storage_with(&x));
        assert_eq!(
            c.storage().as_slice(),
            &expected.reorder(&<(I, J)>::names()).data[..]
        );
    }
}

#[test]
fn chained_views_against_the_reference() {
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    for _ in 0..300 {
        let r = Ref::random(&mut rng, &["I", "J"], 5);
        let x = tensor_ij(&r);
        let k = rng.random_range(1..4);
        // broadcast → permute → slice → pad → slice → index
        let b = x.broadcast::<(K, I, J)>(K.len(k)).unwrap();
        let mut reference = r.broadcast("K", k);
        let p = b.axes_with_order::<(J, K, I)>();
        let (s0, e0, st0) = random_slice(&mut rng, r.lens[1]);
        let s = p.slice::<J>(s0..e0, st0).unwrap();
        reference = reference.slice("J", s0, e0, st0);
        let (before, after) = (rng.random_range(0..3), rng.random_range(0..3));
        let padded = s.pad::<I>(before, after).unwrap();
        reference = reference.pad("I", before, after);
        let (s1, e1, st1) = random_slice(&mut rng, reference.lens[reference.axis("I")]);
        let sliced = padded.slice::<I>(s1..e1, st1).unwrap();
        reference = reference.slice("I", s1, e1, st1);
        assert_matches(&sliced, &reference);
        assert!(sliced.shares_storage_with(&x));
        let ki = rng.random_range(0..k);
        let last: Tensor<f64, (J, I)> = sliced.index(K.at(ki)).unwrap();
        assert_matches(&last, &reference.index("K", ki));
        // reading through get agrees with to_vec
        let lens = last.lens().to_vec();
        for ix in Ref::indices(&lens) {
            let expected = reference.index("K", ki).reorder(&<(J, I)>::names()).at(&ix);
            assert_eq!(last.get((J.at(ix[0]), I.at(ix[1]))).unwrap(), expected);
        }
    }
}

#[test]
fn cast_axes_renames_position_by_position() {
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let r = Ref::random(&mut rng, &["I", "J"], 4);
    let x = tensor_ij(&r);
    let c: Tensor<f64, (K, L)> = x.cast_axes().unwrap();
    assert_matches(&c, &r.rename(&["K", "L"]));
    assert!(c.shares_storage_with(&x));
    assert_eq!(c.layout(), x.layout());
}

#[test]
fn transpose_maps_axes_to_duals_and_back() {
    let x = Tensor::<f64, (Dual<I>, J)>::from_fn((Len::<Dual<I>>::new(2), J.len(3)), |ix| {
        (10 * ix.of::<Dual<I>>() + ix.of::<J>()) as f64
    })
    .unwrap();
    let t: Tensor<f64, (I, Dual<J>)> = x.transpose();
    assert_eq!(t.get((I.at(1), Dual::<J>::new().at(2))).unwrap(), 12.0);
    assert!(t.shares_storage_with(&x));
    let back: Tensor<f64, (Dual<I>, J)> = t.transpose();
    assert_eq!(back, x);
}

#[test]
fn flatten_is_a_view_when_strides_allow_and_unflatten_remembers_lengths() {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    for _ in 0..100 {
        let lens = [
            rng.random_range(0..4),
            rng.random_range(0..4),
            rng.random_range(0..4),
        ];
        let x = Tensor::<f64, (I, J, K)>::from_fn(
            (I.len(lens[0]), J.len(lens[1]), K.len(lens[2])),
            |ix| (100 * ix.of::<I>() + 10 * ix.of::<J>() + ix.of::<K>()) as f64,
        )
        .unwrap();
        let f: Tensor<f64, (I, Flat<(J, K)>)> = x.flatten::<(J, K)>().unwrap();
        assert!(
            f.shares_storage_with(&x),
            "J, K in storage order flatten without a copy"
        );
        let expected: Vec<f64> = x.to_vec();
        assert_eq!(f.to_vec(), expected);
        let back: Tensor<f64, (I, J, K)> = f.unflatten::<(J, K)>().unwrap();
        assert_eq!(back, x);
        assert!(back.shares_storage_with(&x));
        // K before J is not reachable with one stride: copied, values still right
        let g: Tensor<f64, (I, Flat<(K, J)>)> = x.flatten::<(K, J)>().unwrap();
        assert_eq!(g.to_vec(), x.to_vec_in::<(I, K, J)>());
        assert_eq!(g.unflatten::<(K, J)>().unwrap(), x);
    }
}

#[test]
fn unflatten_errors_name_the_axis() {
    let f = Tensor::<f32, (Flat<(I, J)>,)>::zeros(Len::<Flat<(I, J)>>::new(6)).unwrap();
    let err = f.unflatten::<(I, J)>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "the part lengths of axis `Flat<(I, J)>` are unknown: it did not come from `flatten`"
    );
    let x = Tensor::<f32, (I, J)>::zeros((I.len(2), J.len(3))).unwrap();
    let sliced = x
        .flatten::<(I, J)>()
        .unwrap()
        .slice::<Flat<(I, J)>>(0..4, 1)
        .unwrap();
    let err = sliced.unflatten::<(I, J)>().unwrap_err();
    assert_eq!(
        err,
        Error::FlatLengthMismatch {
            axis: "Flat<(I, J)>".into(),
            len: 4,
            parts: "I=2, J=3".into(),
            product: 6
        }
    );
}

#[test]
fn bad_ranges_and_steps_are_errors() {
    let x = Tensor::<f32, (I, J)>::zeros((I.len(2), J.len(3))).unwrap();
    assert_eq!(
        x.slice::<J>(1..4, 1).unwrap_err(),
        Error::RangeOutOfBounds {
            axis: "J".into(),
            start: 1,
            end: 4,
            len: 3
        }
    );
    assert_eq!(
        x.slice::<J>(
            (std::ops::Bound::Included(2), std::ops::Bound::Excluded(1)),
            1
        )
        .unwrap_err()
        .to_string(),
        "range 2..1 is out of bounds for axis `J` of length 3"
    );
    assert_eq!(
        x.slice::<I>(.., 0).unwrap_err(),
        Error::ZeroStep { axis: "I".into() }
    );
    assert_eq!(
        x.index(J.at(3)).unwrap_err(),
        Error::IndexOutOfRange {
            axis: "J".into(),
            index: 3,
            len: 3
        }
    );
    assert!(matches!(
        x.pad::<I>(usize::MAX, 1),
        Err(Error::SizeOverflow { .. })
    ));
}

#[test]
fn indexing_into_padding_gives_zeros() {
    let x = Tensor::<f32, (I, J)>::ones((I.len(2), J.len(2))).unwrap();
    let p = x.pad::<I>(1, 0).unwrap();
    assert_eq!(p.index(I.at(0)).unwrap().to_vec(), [0.0, 0.0]);
    assert_eq!(p.index(I.at(2)).unwrap().to_vec(), [1.0, 1.0]);
}

#[test]
fn writes_into_views_never_show_through_others() {
    let x = Tensor::<f32, (I, J)>::zeros((I.len(2), J.len(2))).unwrap();
    let mut b = x.broadcast::<(I, J, K)>(K.len(2)).unwrap();
    b.set((I.at(0), J.at(0), K.at(1)), 5.0).unwrap();
    assert_eq!(
        b.get((I.at(0), J.at(0), K.at(0))).unwrap(),
        0.0,
        "only one broadcast copy changes"
    );
    assert_eq!(b.get((I.at(0), J.at(0), K.at(1))).unwrap(), 5.0);
    assert!(x.to_vec().iter().all(|&v| v == 0.0));
    let mut p = x.pad::<J>(1, 1).unwrap();
    p.set((I.at(1), J.at(0)), 2.0).unwrap();
    assert_eq!(p.to_vec(), [0., 0., 0., 0., 2., 0., 0., 0.]);
}

#[test]
fn to_layout_copies_into_the_requested_order() {
    let mut rng = ChaCha8Rng::seed_from_u64(18);
    for _ in 0..50 {
        let r = Ref::random(&mut rng, &["I", "J"], 5);
        let x = tensor_ij(&r).slice::<J>(.., -1).unwrap();
        let t = x.to_layout::<(J, I)>().unwrap();
        assert!(!t.shares_storage_with(&x));
        assert_eq!(
            t.storage().as_slice(),
            &r.slice("J", 0, r.lens[1], -1)
                .reorder(&<(J, I)>::names())
                .data[..]
        );
        assert_eq!(t.layout().offset(), 0);
    }
}

#[test]
fn concat_stack_split_and_iteration() {
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    for _ in 0..50 {
        let a = Ref::random(&mut rng, &["I", "J"], 4);
        let mut b = Ref::random(&mut rng, &["I", "J"], 4);
        b = Ref::build(b.names.clone(), vec![b.lens[0], a.lens[1]], |ix| {
            b.lens[1] as f64 + ix[0] as f64 * 7.0 + ix[1] as f64
        });
        let (x, y) = (
            tensor_ij(&a),
            tensor_ij(&b)
                .axes_with_order::<(J, I)>()
                .to_layout::<(I, J)>()
                .unwrap(),
        );
        let c = Tensor::concat::<I>(&[&x, &y]).unwrap();
        let mut data = a.data.clone();
        data.extend_from_slice(&b.data);
        assert_matches(
            &c,
            &Ref {
                names: a.names.clone(),
                lens: vec![a.lens[0] + b.lens[0], a.lens[1]],
                data,
            },
        );
        let pieces = c.split::<I>(&[a.lens[0], b.lens[0]]).unwrap();
        assert_eq!(pieces[0], x);
        assert_eq!(pieces[1], y);
        assert!(pieces[1].shares_storage_with(&c));
        let rows: Vec<Tensor<f64, (J,)>> = c.iter_axis::<I>().collect();
        assert_eq!(rows.len(), a.lens[0] + b.lens[0]);
        let s: Tensor<f64, (K, I, J)> = Tensor::stack::<K>(&[&x, &x]).unwrap();
        assert_eq!(s.index(K.at(1)).unwrap(), x);
    }
    let x = Tensor::<f32, (I, J)>::zeros((I.len(2), J.len(3))).unwrap();
    let y = Tensor::<f32, (I, J)>::zeros((I.len(2), J.len(4))).unwrap();
    assert_eq!(
        Tensor::concat::<I>(&[&x, &y]).unwrap_err().to_string(),
        "axis `J` has length 3 in one operand and 4 in the other"
    );
    assert!(matches!(
        Tensor::<f32, (I, J)>::concat::<I>(&[]),
        Err(Error::NothingToJoin { .. })
    ));
    assert!(matches!(
        Tensor::stack::<K>(&[&x, &y]),
        Err(Error::LengthMismatch { .. })
    ));
    assert!(matches!(
        x.split::<J>(&[1, 1]),
        Err(Error::SplitLengths { len: 3, .. })
    ));
}

#[test]
fn gather_for_label_lookup_and_embedding_lookup() {
    let mut rng = ChaCha8Rng::seed_from_u64(20);
    for _ in 0..50 {
        // table (I=vocab, J=emb), ids (K, L)
        let table = Ref::random(&mut rng, &["I", "J"], 4);
        if table.lens[0] == 0 {
            continue;
        }
        let id_lens = vec![rng.random_range(0..3), rng.random_range(0..3)];
        let id_values: Vec<f64> = (0..id_lens[0] * id_lens[1])
            .map(|_| rng.random_range(0..table.lens[0]) as f64)
            .collect();
        let ids = Ref {
            names: vec!["K".into(), "L".into()],
            lens: id_lens,
            data: id_values,
        };
        let x = tensor_ij(&table);
        let idx = Tensor::<i64, (K, L)>::from_vec(
            (K.len(ids.lens[0]), L.len(ids.lens[1])),
            ids.data.iter().map(|&v| v as i64).collect(),
        )
        .unwrap();
        let g: Tensor<f64, (J, K, L)> = x.gather::<I, _, _>(&idx).unwrap();
        let expected = Ref::build(
            vec!["J".into(), "K".into(), "L".into()],
            vec![table.lens[1], ids.lens[0], ids.lens[1]],
            |ix| table.at(&[ids.at(&[ix[1], ix[2]]) as usize, ix[0]]),
        );
        assert_matches(&g, &expected);
    }
    // Through views: the table sliced (any step), padded and permuted, the indices transposed.
    for round in 0..100 {
        let r = Ref::random(&mut rng, &["I", "J"], 5);
        if r.lens[0] == 0 {
            continue;
        }
        let (start, end, step) = random_slice(&mut rng, r.lens[1]);
        let (before, after) = (round % 2, round % 3);
        let table = tensor_ij(&r).slice::<J>(start..end, step).unwrap();
        let table = table.pad::<J>(before, after).unwrap();
        let table = table.axes_with_order::<(J, I)>();
        let table_ref = r.slice("J", start, end, step).pad("J", before, after);
        let (k, l) = (rng.random_range(0..4), rng.random_range(0..4));
        let id_values: Vec<i64> = (0..k * l)
            .map(|_| rng.random_range(0..r.lens[0]) as i64)
            .collect();
        // Stored (L, K): element (k, l) at l·len(K) + k.
        let ids = Tensor::<i64, (L, K)>::from_vec((L.len(l), K.len(k)), id_values.clone())
            .unwrap()
            .axes_with_order::<(K, L)>();
        let g: Tensor<f64, (J, K, L)> = table.gather::<I, _, _>(&ids).unwrap();
        let expected = Ref::build(
            vec!["J".into(), "K".into(), "L".into()],
            vec![table_ref.lens[1], k, l],
            |ix| table_ref.at(&[id_values[ix[2] * k + ix[1]] as usize, ix[0]]),
        );
        assert_matches(&g, &expected);
    }
    // label lookup: shared Batch-like axis J is matched, not crossed
    let logits =
        Tensor::<f64, (J, I)>::from_vec((J.len(2), I.len(3)), vec![0., 1., 2., 3., 4., 5.])
            .unwrap();
    let labels = Tensor::<u8, (J,)>::from_vec(J.len(2), vec![1, 2]).unwrap();
    let picked: Tensor<f64, (J,)> = logits.gather::<I, _, _>(&labels).unwrap();
    assert_eq!(picked.to_vec(), [1., 5.]);
    let bad = Tensor::<i32, (J,)>::from_vec(J.len(2), vec![1, -1]).unwrap();
    assert_eq!(
        logits.gather::<I, _, _>(&bad).unwrap_err().to_string(),
        "gather index -1 is out of range for axis `I` of length 3"
    );
    let wrong = Tensor::<i32, (J,)>::zeros(J.len(5)).unwrap();
    assert!(matches!(
        logits.gather::<I, _, _>(&wrong),
        Err(Error::LengthMismatch {
            left: 2,
            right: 5,
            ..
        })
    ));
}

#[test]
fn arena_hands_out_tensors_over_one_buffer() {
    let mut builder = ArenaBuilder::new();
    let w = builder.add::<(I, J), f32>((I.len(3), J.len(5))).unwrap();
    let b = builder.add::<(J,), f32>(J.len(5)).unwrap();
    let mut arena = builder.build(0.0f32);
    let (tw, tb) = (arena.tensor(&w).unwrap(), arena.tensor(&b).unwrap());
    assert!(tw.shares_storage_with(&tb));
    assert_eq!(tb.layout().offset() % 16, 0);
    assert!(tb.layout().offset() >= 15);
    // Every tensor of the arena starts on a cache line: the buffer does, and offsets are
    // multiples of 16 elements.
    let start = arena.storage().as_slice().as_ptr() as usize;
    assert_eq!(start % axes::storage::HOST_ALIGN, 0);
    let value =
        Tensor::<f32, (J, I)>::from_fn((I.len(3), J.len(5)), |ix| ix.of::<I>() as f32).unwrap();
    arena.set(&w, &value).unwrap();
    assert_eq!(arena.tensor(&w).unwrap(), value);
    assert!(
        tw.to_vec().iter().all(|&v| v == 0.0),
        "views taken before a write keep their values"
    );
    arena.flat_mut().iter_mut().for_each(|v| *v += 1.0);
    assert_eq!(arena.tensor(&b).unwrap().to_vec(), [1.0; 5]);
    let wrong = Tensor::<f32, (J,)>::zeros(J.len(4)).unwrap();
    assert_eq!(
        arena.set(&b, &wrong).unwrap_err().to_string(),
        "axis `J` has length 4 in one operand and 5 in the other"
    );
}

#[test]
fn ndarray_views_and_arrays_without_copies() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    for _ in 0..100 {
        let r = Ref::random(&mut rng, &["I", "J"], 4);
        let x = tensor_ij(&r);
        let (start, end, step) = random_slice(&mut rng, r.lens[1]);
        let s = x
            .slice::<J>(start..end, step)
            .unwrap()
            .broadcast::<(I, J, K)>(K.len(2))
            .unwrap();
        let expected = r
            .slice("J", start, end, step)
            .broadcast("K", 2)
            .reorder(&<(K, J, I)>::names());
        let view = s.as_ndarray::<(K, J, I)>().unwrap();
        assert_eq!(view.shape(), &expected.lens[..]);
        assert_eq!(view.iter().copied().collect::<Vec<_>>(), expected.data);
        let first = view.as_ptr();
        assert!(x.storage().as_slice().as_ptr_range().contains(&first) || expected.data.is_empty());
    }
    let a = ndarray::Array::from_shape_vec((2, 3), vec![1., 2., 3., 4., 5., 6.]).unwrap();
    let ptr = a.as_ptr();
    let t = Tensor::<f64, (J, I)>::from_ndarray(a.reversed_axes()).unwrap();
    assert_eq!(t.storage().as_slice().as_ptr(), ptr, "no copy");
    assert_eq!(t.get((I.at(1), J.at(2))).unwrap(), 6.0);
    let padded = t.pad::<I>(1, 0).unwrap();
    assert!(matches!(
        padded.as_ndarray::<(I, J)>(),
        Err(Error::Padded { .. })
    ));
    let err = Tensor::<f64, (I, J, K)>::from_ndarray(ndarray::Array::<f64, _>::zeros((2, 2)))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "an array with 2 axes cannot become a tensor with the 3 axes (I, J, K)"
    );
}

#[test]
fn flat_part_lengths_survive_computation() {
    let x = Tensor::<f64, (I, J, K)>::from_fn((I.len(2), J.len(3), K.len(4)), |ix| {
        (100 * ix.of::<I>() + 10 * ix.of::<J>() + ix.of::<K>()) as f64
    })
    .unwrap();
    let f: Tensor<f64, (I, Flat<(J, K)>)> = x.flatten::<(J, K)>().unwrap();
    // an element-wise result
    let doubled = (&f * 2.0).eval().unwrap();
    assert_eq!(
        doubled.unflatten::<(J, K)>().unwrap(),
        (&x * 2.0).eval().unwrap()
    );
    // a reduction over another axis
    let summed: Tensor<f64, (Flat<(J, K)>,)> = f.sum::<(I,)>().unwrap();
    assert_eq!(
        summed.unflatten::<(J, K)>().unwrap(),
        x.sum::<(I,)>().unwrap()
    );
    // flatten, contract, unflatten
    let w = Tensor::<f64, (I,)>::from_vec(I.len(2), vec![1.0, -2.0]).unwrap();
    let y: Tensor<f64, (Flat<(J, K)>,)> = dot(&f, &w).unwrap();
    let expected: Tensor<f64, (J, K)> = dot(&x, &w).unwrap();
    assert_eq!(y.unflatten::<(J, K)>().unwrap(), expected);
    // a concatenation along another axis
    let both = Tensor::concat::<I>(&[&f, &f]).unwrap();
    assert_eq!(both.unflatten::<(J, K)>().unwrap().lens(), [4, 3, 4]);
    // two different splits of one axis: unknown rather than a wrong split
    let other = Tensor::<f64, (I, J, K)>::zeros((I.len(2), J.len(4), K.len(3))).unwrap();
    let g: Tensor<f64, (I, Flat<(J, K)>)> = other.flatten::<(J, K)>().unwrap();
    let err = (&f + &g).eval().unwrap().unflatten::<(J, K)>().unwrap_err();
    assert!(matches!(err, axes::Error::UnknownFlatParts { .. }), "{err}");
}
