use axes::prelude::*;

#[derive(Axis)] struct A1;
#[derive(Axis)] struct A2;
#[derive(Axis)] struct A3;
#[derive(Axis)] struct A4;
#[derive(Axis)] struct A5;
#[derive(Axis)] struct A6;
#[derive(Axis)] struct A7;
#[derive(Axis)] struct A8;
#[derive(Axis)] struct A9;

fn takes(_x: &Tensor<f32, (A1, A2, A3, A4, A5, A6, A7, A8, A9)>) {}

fn main() {}
