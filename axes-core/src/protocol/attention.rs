//! Fused attention as device work: an [`AttentionJob`] (`softmax(scale · q·kᵀ + mask) · v`
//! for every batch entry, the query × key probabilities never written), its forward
//! ([`Backend::attention`](super::Backend::attention)) and backward
//! ([`Backend::attention_backward`](super::Backend::attention_backward)).
//!
//! Results are fresh row-major buffers `[batch][position][column]`, so a backend writes
//! each element once at a place no other element takes; the caller views them in its own
//! axes' order.

use super::DeviceMemory;
use crate::element::DType;
use crate::error::{Error, Result};

/// The widest heads (the queries' and keys' width, and the values') that the device backends
/// run fused; [`MultiHeadAttention`](crate::nn::transformer::MultiHeadAttention) composes
/// wider ones on a device from `dot_over` and `softmax`.
pub const FUSED_ATTENTION_MAX_WIDTH: usize = 256;

/// Where an operand of an [`AttentionJob`] is: element `c` of row `i` (a query or key
/// position) of batch entry `b` at `batch[b] + i·row + cols[c]` of `memory`.
#[derive(Clone, Copy, Debug)]
pub struct AttentionOperand<'a> {
    /// The buffer, on the job's device.
    pub memory: &'a DeviceMemory,
    /// The offset of each batch entry's row 0, column 0.
    pub batch: &'a [isize],
    /// The step from one row to the next.
    pub row: isize,
    /// The offset of each column within a row.
    pub cols: &'a [isize],
}

/// An additive mask of an [`AttentionJob`]: the value added to the score of query `i` and key
/// `j` of batch entry `b` is at `batch[b] + i·query + j·key` of `memory` (−∞ hides the key).
#[derive(Clone, Copy, Debug)]
pub struct AttentionMask<'a> {
    /// The buffer, on the job's device.
    pub memory: &'a DeviceMemory,
    /// The offset of each batch entry's (0, 0).
    pub batch: &'a [isize],
    /// The step along the queries.
    pub query: isize,
    /// The step along the keys.
    pub key: isize,
}

/// The sizes of one attention call.
#[derive(Clone, Copy, Debug)]
pub struct AttentionShape {
    /// Batch entries (every batch axis's positions, together).
    pub batch: usize,
    /// Query positions.
    pub queries: usize,
    /// Key (and value) positions.
    pub keys: usize,
    /// The width queries and keys share (contracted).
    pub width: usize,
    /// The width of the values and of the result.
    pub value_width: usize,
    /// The scores' scale.
    pub scale: f64,
    /// Whether query `i` sees only keys `0..=i`.
    pub causal: bool,
}

/// Fused attention for a device, over the batch entries of `shape`: queries `q` (`queries`
/// rows of `width`), keys `k` (`keys` rows of `width`) and values `v` (`keys` rows of
/// `value_width`). A query that sees no key gets zeros and passes no gradient. Half types
/// are computed in f32.
#[derive(Clone, Copy, Debug)]
pub struct AttentionJob<'a> {
    /// The element type of the operands, the mask and the results.
    pub dtype: DType,
    /// The sizes, the scale and whether the mask is causal.
    pub shape: AttentionShape,
    /// The queries.
    pub q: AttentionOperand<'a>,
    /// The keys.
    pub k: AttentionOperand<'a>,
    /// The values.
    pub v: AttentionOperand<'a>,
    /// A mask added to the scores, where there is one.
    pub mask: Option<AttentionMask<'a>>,
}

/// What the backward pass of an [`AttentionJob`] reads besides its operands.
#[derive(Clone, Copy, Debug)]
pub struct AttentionSaved<'a> {
    /// The forward's result (`queries` rows of `value_width`).
    pub out: AttentionOperand<'a>,
    /// The gradient of the result (`queries` rows of `value_width`).
    pub grad: AttentionOperand<'a>,
    /// Each query's log-sum-exp, `[batch][query]`, of [`AttentionJob::wide`].
    pub lse: &'a DeviceMemory,
}

impl AttentionJob<'_> {
    /// The type the log-sum-exp is kept in: f64 for f64, f32 otherwise.
    pub fn wide(&self) -> DType {
        if self.dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        }
    }

    /// An error unless the operands, the mask and `saved` are floats of the job's type whose
    /// every element the job reads lies in its buffer, and the job's offsets match its
    /// lengths: backends check this before a kernel reads device memory.
    pub fn check(&self, saved: Option<&AttentionSaved<'_>>) -> Result<()> {
        if !matches!(
            self.dtype,
            DType::F32 | DType::F64 | DType::F16 | DType::BF16
        ) {
            return Err(Error::Unsupported {
                what: format!("attention over {} elements", self.dtype.name()),
            });
        }
        let mut operands = vec![
            ("the queries", &self.q, self.shape.queries, self.shape.width),
            ("the keys", &self.k, self.shape.keys, self.shape.width),
            (
                "the values",
                &self.v,
                self.shape.keys,
                self.shape.value_width,
            ),
        ];
        if let Some(saved) = saved {
            operands.push((
                "the saved result",
                &saved.out,
                self.shape.queries,
                self.shape.value_width,
            ));
            operands.push((
                "the result's gradient",
                &saved.grad,
                self.shape.queries,
                self.shape.value_width,
            ));
        }
        for (what, operand, rows, cols) in operands {
            if operand.batch.len() != self.shape.batch || operand.cols.len() != cols {
                return Err(Error::Unsupported {
                    what: format!(
                        "{what} of an attention job with {} batch offsets and {} column \
                         offsets, for {} batch entries of {cols} columns",
                        operand.batch.len(),
                        operand.cols.len(),
                        self.shape.batch
                    ),
                });
            }
            if self.shape.batch == 0 || rows == 0 || cols == 0 {
                continue;
            }
            let reach = extremes(operand.batch)
                + extremes(&[0, (rows - 1) as isize * operand.row])
                + extremes(operand.cols);
            check_inside(what, self.dtype, operand.memory, reach)?;
        }
        if let Some(mask) = &self.mask {
            if mask.batch.len() != self.shape.batch {
                return Err(Error::Unsupported {
                    what: format!(
                        "a mask of an attention job with {} batch offsets, for {} batch entries",
                        mask.batch.len(),
                        self.shape.batch
                    ),
                });
            }
            if self.shape.batch > 0 && self.shape.queries > 0 && self.shape.keys > 0 {
                let reach = extremes(mask.batch)
                    + extremes(&[0, (self.shape.queries - 1) as isize * mask.query])
                    + extremes(&[0, (self.shape.keys - 1) as isize * mask.key]);
                check_inside("the mask", self.dtype, mask.memory, reach)?;
            }
        }
        if let Some(saved) = saved {
            let rows = self.shape.batch * self.shape.queries;
            if rows > 0 {
                let whole = Reach {
                    low: 0,
                    high: rows as isize - 1,
                };
                check_inside("the log-sum-exp", self.wide(), saved.lse, whole)?;
            }
        }
        Ok(())
    }
}

/// The lowest and highest offset a set of positions reaches.
#[derive(Clone, Copy)]
struct Reach {
    low: isize,
    high: isize,
}

impl std::ops::Add for Reach {
    type Output = Reach;
    fn add(self, other: Reach) -> Reach {
        Reach {
            low: self.low.saturating_add(other.low),
            high: self.high.saturating_add(other.high),
        }
    }
}

fn extremes(offsets: &[isize]) -> Reach {
    Reach {
        low: offsets.iter().copied().min().unwrap_or(0),
        high: offsets.iter().copied().max().unwrap_or(0),
    }
}

fn check_inside(what: &str, dtype: DType, memory: &DeviceMemory, reach: Reach) -> Result<()> {
    let len = (memory.bytes() / dtype.size()) as isize;
    if reach.low < 0 || reach.high >= len {
        return Err(Error::Unsupported {
            what: format!(
                "{what} of an attention job reaching elements {}..={} of a buffer of {len} {} \
                 elements",
                reach.low,
                reach.high,
                dtype.name()
            ),
        });
    }
    Ok(())
}
