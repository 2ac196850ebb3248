//! The one error type of the library. Every message names the axis and the lengths involved.

use thiserror::Error;

/// What went wrong, with the axis names and lengths involved.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// Two operands give one axis different lengths.
    #[error("axis `{axis}` has length {left} in one operand and {right} in the other")]
    LengthMismatch {
        /// The axis.
        axis: String,
        /// Its length on the left.
        left: usize,
        /// Its length on the right.
        right: usize,
    },
    /// A buffer's element count does not match the lengths it was given.
    #[error("{got} elements were given, but the lengths ({lengths}) need {expected}")]
    ElementCount {
        /// The named lengths, e.g. `Batch=2, Hidden=3`.
        lengths: String,
        /// The product of the lengths.
        expected: usize,
        /// The element count given.
        got: usize,
    },
    /// An index is past the end of an axis.
    #[error("index {index} is out of range for axis `{axis}` of length {len}")]
    IndexOutOfRange {
        /// The axis.
        axis: String,
        /// The index given.
        index: usize,
        /// The axis length.
        len: usize,
    },
    /// An axis declared with `#[axis(len = N)]` was given another length.
    #[error("axis `{axis}` has the fixed length {fixed}, but length {got} was given")]
    FixedLength {
        /// The axis.
        axis: String,
        /// Its fixed length.
        fixed: usize,
        /// The length given.
        got: usize,
    },
    /// The element count of the lengths does not fit in `usize`.
    #[error("the lengths ({lengths}) hold more elements than fit in memory")]
    SizeOverflow {
        /// The named lengths.
        lengths: String,
    },
    /// A random fill was asked for an empty or invalid range.
    #[error("cannot draw values from the empty or invalid range [{low}, {high})")]
    InvalidRange {
        /// The lower bound, as written.
        low: String,
        /// The upper bound, as written.
        high: String,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
