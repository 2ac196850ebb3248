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
    /// A device (or the host) could not give the memory a result needs.
    #[error("out of memory on {device}: {requested} requested{}", match available {
        Some(free) => format!(", {} available", bytes_in_words(*free)),
        None => String::new(),
    }, requested = bytes_in_words(*requested))]
    OutOfMemory {
        /// The device (`cpu` for host memory).
        device: String,
        /// The bytes asked for.
        requested: u64,
        /// The bytes the device reported free, where it says.
        available: Option<u64>,
    },
    /// A range is not within an axis.
    #[error("range {start}..{end} is out of bounds for axis `{axis}` of length {len}")]
    RangeOutOfBounds {
        /// The axis.
        axis: String,
        /// Start of the range.
        start: usize,
        /// End of the range (exclusive).
        end: usize,
        /// The axis length.
        len: usize,
    },
    /// A window (convolution, pooling) that does not fit its axis, or whose stride or
    /// dilation is 0.
    #[error(
        "a window of {kernel} (stride {stride}, padding {padding}, dilation {dilation}) does not          fit axis `{axis}` of length {len}: it needs dilation·(window − 1) + 1 ≤ length + 2·padding,          and a window, stride and dilation of at least 1"
    )]
    WindowDoesNotFit {
        /// The axis.
        axis: String,
        /// Its length, before padding.
        len: usize,
        /// The window's length.
        kernel: usize,
        /// The step between windows.
        stride: usize,
        /// Positions added at each end.
        padding: usize,
        /// The step between a window's elements.
        dilation: usize,
    },
    /// A slice step of zero.
    #[error("the slice step for axis `{axis}` is 0; use a positive or negative step")]
    ZeroStep {
        /// The axis.
        axis: String,
    },
    /// A handle ([`Slot`](crate::arena::Slot)) used with an arena not built from its
    /// builder.
    #[error(
        "tensor handle {index} belongs to another arena: use the handles from the builder this \
         arena (or these parameters) was built from"
    )]
    ForeignSlot {
        /// The handle's position in its own arena.
        index: usize,
    },
    /// A gradient used with other parameters than its own (an optimizer's step, a sum of
    /// gradients).
    #[error(
        "the gradient belongs to other parameters: take it with `gradient` from the parameters \
         it is used with (the ones this optimizer updates, the other gradient's)"
    )]
    ForeignGradient,
    /// `unflatten` on a composite axis whose part lengths are not known.
    #[error("the part lengths of axis `{axis}` are unknown: it did not come from `flatten`")]
    UnknownFlatParts {
        /// The composite axis.
        axis: String,
    },
    /// `unflatten` on a composite axis whose length no longer matches its parts.
    #[error("axis `{axis}` has length {len}, but its parts ({parts}) make {product}")]
    FlatLengthMismatch {
        /// The composite axis.
        axis: String,
        /// Its length.
        len: usize,
        /// The remembered parts, e.g. `H=2, W=3`.
        parts: String,
        /// Their product.
        product: usize,
    },
    /// `concat` or `stack` of no tensors.
    #[error("nothing to join along axis `{axis}`: no tensors were given")]
    NothingToJoin {
        /// The axis.
        axis: String,
    },
    /// `split` lengths that do not add up to the axis length.
    #[error("cannot split axis `{axis}` of length {len} into pieces {pieces}")]
    SplitLengths {
        /// The axis.
        axis: String,
        /// Its length.
        len: usize,
        /// The piece lengths asked for.
        pieces: String,
    },
    /// An index in a `gather` index tensor is negative or too large.
    #[error("gather index {index} is out of range for axis `{axis}` of length {len}")]
    GatherIndex {
        /// The axis gathered along.
        axis: String,
        /// The index found.
        index: i64,
        /// The axis length.
        len: usize,
    },
    /// An operation that needs stored elements got a padded view.
    #[error("the tensor ({lengths}) is a padded view; make it contiguous first")]
    Padded {
        /// The tensor's named lengths.
        lengths: String,
    },
    /// An array with a different number of axes than the tensor type.
    #[error("an array with {got} axes cannot become a tensor with the {expected} axes {axes}")]
    RankMismatch {
        /// The tensor's axes.
        axes: String,
        /// The tensor's number of axes.
        expected: usize,
        /// The array's number of axes.
        got: usize,
    },
    /// Two distinct axis types with the same type-level id (a collision of the 64-bit hashes
    /// that name axes at compile time, as between two crates): the compiler took them for
    /// one axis where the computation tells them apart.
    #[error(
        "the axes ({left}) and ({right}) pair differently by type than by type-level id: two distinct axis types share an id (a hash collision); rename one of them"
    )]
    AxisIdCollision {
        /// One operand's axes.
        left: String,
        /// The other operand's axes.
        right: String,
    },
    /// An integer division by zero (as in PyTorch; float division gives ±inf or NaN).
    #[error("integer division by zero")]
    DivisionByZero,
    /// A reduction that needs at least one element got an empty axis.
    #[error("cannot take the {reduction} over the empty axis `{axis}`: it has length 0")]
    EmptyReduction {
        /// The reduction: "maximum", "minimum", "mean", …
        reduction: &'static str,
        /// The axis.
        axis: String,
    },
    /// A random fill was asked for an empty or invalid range.
    #[error("cannot draw values from the empty or invalid range [{low}, {high})")]
    InvalidRange {
        /// The lower bound, as written.
        low: String,
        /// The upper bound, as written.
        high: String,
    },
    /// A dropout probability outside `[0, 1)`.
    #[error("a dropout probability must be in [0, 1), not {p}")]
    DropoutProbability {
        /// The probability given, as written.
        p: String,
    },
    /// Operands of one operation are on different devices.
    #[error("operands on different devices: {left} and {right}; copy one with `.to(&device)`")]
    DeviceMismatch {
        /// One operand's device.
        left: String,
        /// The other's.
        right: String,
    },
    /// A device asked for by name that this build or machine cannot give.
    #[error("device `{device}` is not available: {reason}")]
    DeviceUnavailable {
        /// The name asked for.
        device: String,
        /// Why: a name no backend serves, a backend this build lacks, or what the machine
        /// lacks.
        reason: String,
    },
    /// A recorded step ([`crate::record::Recorded`]) cannot run as recorded.
    #[error("recorded step: {what}")]
    RecordedStep {
        /// What stands in the way.
        what: String,
    },
    /// An operation this build or device cannot run.
    #[error("not supported: {what}")]
    Unsupported {
        /// What was asked for.
        what: String,
    },
    /// A gradient was asked for a variable that does not need one, or of a result that is
    /// not a scalar.
    #[error("no gradient: {reason}")]
    NoGradient {
        /// Why.
        reason: String,
    },
    /// Labels out of range for the class axis.
    #[error("label {label} is out of range for the class axis `{axis}` of length {len}")]
    LabelOutOfRange {
        /// The class axis.
        axis: String,
        /// The label.
        label: i64,
        /// The class axis length.
        len: usize,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {reason}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A setting (of an optimizer, a schedule, a model) outside the values it allows.
    #[error("`{setting}` is {value}, but it must be {allowed}")]
    InvalidSetting {
        /// The setting, as `Type::field`.
        setting: String,
        /// The value given, as written.
        value: String,
        /// The values it allows.
        allowed: String,
    },
    /// A value that must be finite is NaN or infinite (where finite values are checked:
    /// [`crate::optim::Adam::checking_finite`], [`crate::optim::clip_grad_norm_checked`]).
    #[error("{what} holds {value}: training diverged or read a bad input")]
    NonFinite {
        /// Where: "the gradient of parameter `head.weight`", "the gradient norm", …
        what: String,
        /// The first non-finite value found: NaN, inf or -inf.
        value: String,
    },
    /// A sequence longer than a model's context.
    #[error("{len} positions along axis `{axis}` exceed the model's context of {context}")]
    ContextExceeded {
        /// The sequence axis.
        axis: String,
        /// The sequence's length.
        len: usize,
        /// The longest sequence the model takes.
        context: usize,
    },
    /// A view of a larger buffer where a buffer of exactly its elements is needed.
    #[error(
        "the tensor ({lengths}) is a view of a buffer of {buffer} elements where a buffer of \
         {needed} is needed; make it contiguous first (`.contiguous()`)"
    )]
    ViewOfLargerBuffer {
        /// The view's lengths, as `Axis=len` pairs.
        lengths: String,
        /// The elements of the buffer it views.
        buffer: usize,
        /// The elements needed.
        needed: usize,
    },
    /// An optimizer given parameters other than those it steps (its state belongs to them).
    #[error(
        "`{optimizer}` steps {bound} and was given {given}: each model needs an optimizer of \
         its own"
    )]
    OptimizerMismatch {
        /// The optimizer.
        optimizer: String,
        /// The parameters it steps.
        bound: String,
        /// The parameters it was given.
        given: String,
    },
    /// Saved parameters do not match the model they are loaded into.
    #[error("parameter `{name}`: {reason}")]
    ParameterMismatch {
        /// The parameter's name.
        name: String,
        /// What differs (axis names, lengths, element type).
        reason: String,
    },
}

/// `Result` with this crate's [`Error`](enum@Error).
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `bytes` for a message: the exact count and, from 1 KiB, the nearest binary unit
/// (`4398046511104 bytes (4.0 TiB)`).
fn bytes_in_words(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut scaled = bytes as f64;
    let mut unit = None;
    for name in UNITS {
        if scaled < 1024.0 {
            break;
        }
        scaled /= 1024.0;
        unit = Some(name);
    }
    match unit {
        Some(name) => format!("{bytes} bytes ({scaled:.1} {name})"),
        None => format!("{bytes} bytes"),
    }
}
