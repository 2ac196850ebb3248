//! Which axes a convolution or a pooling moves along, found by role at compile time: the
//! spatial axes (Width; Height and Width; or Depth, Height and Width), the input's Channel
//! axis, and the filter's Channelout and kernel axes.

use typenum::{U0, U1};

use crate::axis::Axis;
use crate::axis::roles::kind;
use crate::list::{
    AxisList, AxisSet, AxisWithRole, ConcatWith, CountRole, Difference, DifferenceWith, Has,
    WithRole,
};
use crate::tensor::Renamed;

/// A role a window moves along.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpatialRole {
    /// The `Depth` role (3-D windows).
    Depth,
    /// The `Height` role (2-D and 3-D windows).
    Height,
    /// The `Width` role (every window).
    Width,
}

impl SpatialRole {
    /// Its index in a per-role array (Depth, Height, Width).
    pub(crate) const fn index(self) -> usize {
        match self {
            SpatialRole::Depth => 0,
            SpatialRole::Height => 1,
            SpatialRole::Width => 2,
        }
    }

    /// Its name, as in messages.
    pub const fn name(self) -> &'static str {
        match self {
            SpatialRole::Depth => "Depth",
            SpatialRole::Height => "Height",
            SpatialRole::Width => "Width",
        }
    }
}

/// The spatial axes of the list `Self`, found by role: the axis with the role `Width`, and
/// those with `Height` and `Depth` where the list has them — what a pooling moves its window
/// along. No Width axis, or two axes of one role, is a compile error naming the role.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::spatial::{SpatialAxes, SpatialRole};
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] #[axis(role = Height)] struct Rows;
/// #[derive(Axis)] #[axis(role = Width)] struct Cols;
/// assert_eq!(
///     <(Cols, Batch, Rows) as SpatialAxes>::spatial(),
///     [(SpatialRole::Height, 2), (SpatialRole::Width, 0)]
/// );
/// ```
pub trait SpatialAxes: AxisSet {
    /// Each spatial role the list has (`Depth` before `Height` before `Width`) and the
    /// position of its axis.
    fn spatial() -> Vec<(SpatialRole, usize)>;
}

/// How many axes of the list `L` have the role `R`.
type CountOf<L, R> = <<L as AxisList>::List as CountRole<R>>::Count;

impl<L> SpatialAxes for L
where
    L: AxisSet + WithRole<kind::Width>,
    L::List: CountRole<kind::Depth> + CountRole<kind::Height>,
    CountOf<L, kind::Depth>: RoleIfCounted<kind::Depth, L>,
    CountOf<L, kind::Height>: RoleIfCounted<kind::Height, L>,
{
    fn spatial() -> Vec<(SpatialRole, usize)> {
        spatial_positions(
            <CountOf<L, kind::Depth> as RoleIfCounted<kind::Depth, L>>::POS,
            <CountOf<L, kind::Height> as RoleIfCounted<kind::Height, L>>::POS,
            <L as WithRole<kind::Width>>::POS,
        )
    }
}

/// The roles present and their positions, outermost first.
fn spatial_positions(
    depth: Option<usize>,
    height: Option<usize>,
    width: usize,
) -> Vec<(SpatialRole, usize)> {
    (depth.map(|p| (SpatialRole::Depth, p)).into_iter())
        .chain(height.map(|p| (SpatialRole::Height, p)))
        .chain([(SpatialRole::Width, width)])
        .collect()
}

/// Internal: where `Self` counts one axis with the role `R` (in a filter, or in the list
/// itself), the position of `L`'s axis with that role; none where it counts none.
#[diagnostic::on_unimplemented(
    message = "more than one axis has the role `{R}`",
    label = "two axes with the role `{R}`",
    note = "an operation that finds an axis by its role needs at most one axis with it"
)]
pub trait RoleIfCounted<R, L> {
    /// The position, where one is counted.
    const POS: Option<usize>;
}

impl<R, L> RoleIfCounted<R, L> for U0 {
    const POS: Option<usize> = None;
}

impl<R: crate::axis::roles::RoleKind, L: WithRole<R>> RoleIfCounted<R, L> for U1 {
    const POS: Option<usize> = Some(<L as WithRole<R>>::POS);
}

/// The filter's axes but the input's Channel axis: its Channelout axis and kernel axes.
type FilterRest<A, F> = Difference<F, (AxisWithRole<A, kind::Channel>,)>;

/// The axes of a convolution's result: the input's axes but its Channel axis, then the
/// filter's Channelout axis.
pub type ConvAxes<A, F> = <A as ConvolveWith<F>>::Output;

/// Where a convolution finds its axes: an input over `Self`, a filter over `F`.
///
/// The input's Channel axis is its axis with the role `Channel`; the filter has that axis,
/// one axis with the role `Channelout` (the output channels) and one kernel axis per spatial
/// role (`Width`, and `Height` and `Depth` for 2-D and 3-D filters), which the input must
/// have too: the window moves along the input's axes with those roles. The input's other
/// axes are batch axes. The result has the input's axes but its Channel axis, then the
/// filter's Channelout axis — so an axis that is one convolution's output channels and the
/// next one's input channels has both roles.
pub trait ConvolveWith<F: AxisSet>: AxisSet {
    /// The input's Channel axis.
    type Channel: Axis;
    /// The filter's Channelout axis.
    type Out: Axis;
    /// The result's axes.
    type Output: AxisSet;
    /// The positions of the axes a convolution uses.
    fn positions() -> ConvPositions;
}

/// The positions of a convolution's axes in its input and filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvPositions {
    /// The input's Channel axis.
    pub channel: usize,
    /// The input's Channel axis in the filter.
    pub filter_channel: usize,
    /// The filter's Channelout axis.
    pub filter_out: usize,
    /// Per spatial role (outermost first): the role, its axis in the input, and the kernel
    /// axis in the filter.
    pub spatial: Vec<(SpatialRole, usize, usize)>,
    /// The input's batch axes the filter has too, and their positions in the filter: each
    /// position along them pairs its channels with its own filters (a grouped convolution).
    pub shared: Vec<(usize, usize)>,
}

impl<A, F> ConvolveWith<F> for A
where
    A: AxisSet + WithRole<kind::Channel>,
    A: DifferenceWith<(AxisWithRole<A, kind::Channel>,)>,
    F: AxisSet + DifferenceWith<(AxisWithRole<A, kind::Channel>,)>,
    F::List: Has<AxisWithRole<A, kind::Channel>>,
    <F::List as Has<AxisWithRole<A, kind::Channel>>>::Out:
        FilterHasChannel<AxisWithRole<A, kind::Channel>, F>,
    FilterRest<A, F>: WithRole<kind::Channelout> + WithRole<kind::Width>,
    A: WithRole<kind::Width>,
    <FilterRest<A, F> as AxisList>::List: CountRole<kind::Depth> + CountRole<kind::Height>,
    CountOf<FilterRest<A, F>, kind::Depth>:
        RoleIfCounted<kind::Depth, A> + RoleIfCounted<kind::Depth, FilterRest<A, F>>,
    CountOf<FilterRest<A, F>, kind::Height>:
        RoleIfCounted<kind::Height, A> + RoleIfCounted<kind::Height, FilterRest<A, F>>,
    Difference<A, (AxisWithRole<A, kind::Channel>,)>:
        ConcatWith<(AxisWithRole<FilterRest<A, F>, kind::Channelout>,)>,
    Renamed<A, AxisWithRole<A, kind::Channel>, AxisWithRole<FilterRest<A, F>, kind::Channelout>>:
        AxisSet,
{
    type Channel = AxisWithRole<A, kind::Channel>;
    type Out = AxisWithRole<FilterRest<A, F>, kind::Channelout>;
    type Output = Renamed<A, Self::Channel, Self::Out>;

    fn positions() -> ConvPositions {
        type Rest<A, F> = FilterRest<A, F>;
        type Depths<A, F> = CountOf<Rest<A, F>, kind::Depth>;
        type Heights<A, F> = CountOf<Rest<A, F>, kind::Height>;
        let channel_id = std::any::TypeId::of::<Self::Channel>();
        let filter_channel = (F::IDS.iter().position(|&id| id == channel_id))
            .expect("the filter has the input's Channel axis");
        // A position in the filter's rest, as a position in the filter.
        let in_filter = |p: usize| if p >= filter_channel { p + 1 } else { p };
        let input = spatial_positions(
            <Depths<A, F> as RoleIfCounted<kind::Depth, A>>::POS,
            <Heights<A, F> as RoleIfCounted<kind::Height, A>>::POS,
            <A as WithRole<kind::Width>>::POS,
        );
        let kernel = spatial_positions(
            <Depths<A, F> as RoleIfCounted<kind::Depth, Rest<A, F>>>::POS,
            <Heights<A, F> as RoleIfCounted<kind::Height, Rest<A, F>>>::POS,
            <Rest<A, F> as WithRole<kind::Width>>::POS,
        );
        let channel = <A as WithRole<kind::Channel>>::POS;
        let filter_out = in_filter(<Rest<A, F> as WithRole<kind::Channelout>>::POS);
        let spatial: Vec<(SpatialRole, usize, usize)> = (input.into_iter().zip(kernel))
            .map(|((role, a), (_, k))| (role, a, in_filter(k)))
            .collect();
        let used =
            |f: usize| f == filter_channel || f == filter_out || spatial.iter().any(|s| s.2 == f);
        let shared = (0..F::RANK)
            .filter(|&f| !used(f))
            .filter_map(|f| {
                let a = A::IDS.iter().position(|&id| id == F::IDS[f])?;
                (!spatial.iter().any(|s| s.1 == a)).then_some((a, f))
            })
            .collect();
        ConvPositions {
            channel,
            filter_channel,
            filter_out,
            spatial,
            shared,
        }
    }
}

/// Witness that the filter `F` has the input's Channel axis `C`.
#[diagnostic::on_unimplemented(
    message = "the filter's axes `{F}` lack the input's Channel axis `{C}`",
    label = "no axis `{C}` in the filter",
    note = "a filter is over the input's Channel axis (role Channel), an axis with the role \
            Channelout and kernel axes with the input's spatial roles"
)]
pub trait FilterHasChannel<C, F> {}

impl<C, F> FilterHasChannel<C, F> for typenum::B1 {}
