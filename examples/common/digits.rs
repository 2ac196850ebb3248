//! The handwritten digits (1,797 8×8 images, 10 classes) for the examples: loaded, scaled,
//! split, and shifted by a pixel for augmentation.

use std::io::Read;
use std::path::Path;

use axes::nn::minibatches;
use axes::prelude::*;

/// An image in a split.
#[derive(Axis)]
pub(crate) struct Sample;
/// A pixel of an 8×8 image, row by row.
#[derive(Axis)]
#[axis(len = 64)]
pub(crate) struct Pixel;

/// Images and their labels.
#[derive(Clone)]
pub(crate) struct Split {
    /// The pixels, scaled to [0, 1].
    pub(crate) x: Tensor<f32, (Sample, Pixel)>,
    /// The digits.
    pub(crate) y: Tensor<i64, (Sample,)>,
}

/// The digits, pixels scaled to [0, 1], shuffled with `seed` and split 80/20.
pub(crate) fn load_digits(
    data: &Path,
    seed: u64,
) -> Result<(Split, Split), Box<dyn std::error::Error>> {
    let path = data.join("digits/digits.csv.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path)?).read_to_string(&mut text)?;
    let rows: Vec<Vec<f32>> = text
        .lines()
        .map(|line| line.split(',').map(|v| v.trim().parse::<f32>()).collect())
        .collect::<Result<_, _>>()?;
    let order = minibatches::<Sample>(rows.len(), rows.len(), seed)?
        .remove(0)
        .to_vec();
    let test_count = rows.len() / 5;
    let split = |indices: &[i64]| -> axes::Result<Split> {
        let pixels = indices
            .iter()
            .flat_map(|&i| rows[i as usize][..64].iter().map(|p| p / 16.0))
            .collect();
        let labels = indices
            .iter()
            .map(|&i| rows[i as usize][64] as i64)
            .collect();
        let n = Sample.len(indices.len());
        Ok(Split {
            x: Tensor::from_vec((n, Pixel.len(64)), pixels)?,
            y: Tensor::from_vec(n, labels)?,
        })
    };
    Ok((split(&order[test_count..])?, split(&order[..test_count])?))
}

/// `data` with every image moved by up to one pixel in each direction (random, from `seed`),
/// the gaps filled with background: a cheap augmentation that teaches some translation
/// invariance.
pub(crate) fn shifted(data: &Split, seed: u64) -> axes::Result<Split> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let pixels = data.x.to_vec_in::<(Sample, Pixel)>();
    let mut out = vec![0.0f32; pixels.len()];
    for (image, moved) in pixels.chunks(64).zip(out.chunks_mut(64)) {
        let (dy, dx): (i32, i32) = (rng.random_range(-1..=1), rng.random_range(-1..=1));
        for r in 0..8i32 {
            for c in 0..8i32 {
                let (sr, sc) = (r - dy, c - dx);
                if (0..8).contains(&sr) && (0..8).contains(&sc) {
                    moved[(r * 8 + c) as usize] = image[(sr * 8 + sc) as usize];
                }
            }
        }
    }
    Ok(Split {
        x: Tensor::from_vec((Sample.len(data.y.len_of::<Sample>()), Pixel.len(64)), out)?,
        y: data.y.clone(),
    })
}
