//! The digits data set shipped in `data/digits/` is intact: 1,797 rows of 64 pixels in 0..=16
//! and a label in 0..=9, every class present, and it loads into a typed tensor.

use std::io::Read;

use axes::prelude::*;

#[derive(Axis)]
struct Sample;
#[derive(Axis)]
#[axis(len = 64)]
struct Pixel;

#[test]
fn digits_csv_has_the_documented_shape() {
    let file = std::fs::File::open(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/data/digits/digits.csv.gz"
    ))
    .unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap();
    let rows: Vec<Vec<f32>> = text
        .lines()
        .map(|line| {
            line.split(',')
                .map(|v| v.trim().parse::<f32>().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 1797);
    assert!(rows.iter().all(|r| r.len() == 65));
    assert!(rows.iter().all(|r| {
        r[..64]
            .iter()
            .all(|&p| (0.0..=16.0).contains(&p) && p.fract() == 0.0)
    }));
    let mut counts = [0usize; 10];
    for r in &rows {
        counts[r[64] as usize] += 1;
    }
    assert!(counts.iter().all(|&c| c > 150), "{counts:?}");
    let pixels: Vec<f32> = rows
        .iter()
        .flat_map(|r| r[..64].iter().map(|p| p / 16.0))
        .collect();
    let x = Tensor::<f32, (Sample, Pixel)>::from_vec((Sample.len(1797), Pixel.len(64)), pixels)
        .unwrap();
    let mean = x.mean::<(Sample, Pixel)>().unwrap().to_vec()[0];
    assert!((0.25..0.35).contains(&mean), "mean pixel {mean}");
}
