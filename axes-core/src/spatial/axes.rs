//! Which axes a convolution or a pooling moves along, found by role at compile time: the
//! spatial axes (Width; Height and Width; or Depth, Height and Width), the input's Channel
//! axis, and the filter's Channelout and kernel axes.

use typenum::{U0, U1};

use crate::axis::Axis;
use crate::list::{
    AxisList, AxisSet, AxisWithRole, ConcatWith, CountRole, Difference, DifferenceWith, Has,
    WithRole,
};
use crate::roles::kind;
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

/// The spatial axes of the list `Self`, found by role: the axis with the role `Width`; or
/// those with `Height` and `Width`; or with `Depth`, `Height` and `Width` — what a pooling
/// moves its window along.
///
/// ```
/// # extern crate axes_core as axes;
/// use axes::prelude::*;
/// use axes::spatial::{SpatialAxes, SpatialRole};
/// #[derive(Axis)] struct Batch;
/// #[derive(Axis)] #[axis(role = Height)] struct Rows;
/// #[derive(Axis)] #[axis(role = Width)] struct Cols;
/// assert_eq!(<(Cols, Batch, Rows) as SpatialAxes>::ROLES, [SpatialRole::Height, SpatialRole::Width]);
/// assert_eq!(<(Cols, Batch, Rows) as SpatialAxes>::positions(), [2, 0]);
/// ```
pub trait SpatialAxes: AxisSet {
    /// The roles, `Depth` before `Height` before `Width`.
    const ROLES: &'static [SpatialRole];
    /// The position in the list of the axis with each role, in the order of `ROLES`.
    fn positions() -> Vec<usize>;
}

/// How many axes of the list `L` have each spatial role (Depth, Height, Width).
pub type SpatialCountsOf<L> = (
    <<L as AxisList>::List as CountRole<kind::Depth>>::Count,
    <<L as AxisList>::List as CountRole<kind::Height>>::Count,
    <<L as AxisList>::List as CountRole<kind::Width>>::Count,
);

impl<L: AxisSet> SpatialAxes for L
where
    L::List: CountRole<kind::Depth> + CountRole<kind::Height> + CountRole<kind::Width>,
    SpatialCountsOf<L>: SpatialRolesIn<L>,
{
    const ROLES: &'static [SpatialRole] = <SpatialCountsOf<L> as SpatialRolesIn<L>>::ROLES;
    fn positions() -> Vec<usize> {
        <SpatialCountsOf<L> as SpatialRolesIn<L>>::positions()
    }
}

/// Internal: spatial roles counted as `Self` (one of Width; Height, Width; Depth, Height,
/// Width), found in the list `L` — the same roles a filter has, found in its input.
#[diagnostic::on_unimplemented(
    message = "a window cannot move along the axes `{L}` by role",
    label = "no spatial axes here, or not one of each role",
    note = "a window moves along the axis with the role Width; Height and Width; or Depth, \
            Height and Width (one axis of each)"
)]
pub trait SpatialRolesIn<L> {
    /// The roles, outermost first.
    const ROLES: &'static [SpatialRole];
    /// The position in `L` of the axis with each role.
    fn positions() -> Vec<usize>;
}

impl<L: WithRole<kind::Width>> SpatialRolesIn<L> for (U0, U0, U1) {
    const ROLES: &'static [SpatialRole] = &[SpatialRole::Width];
    fn positions() -> Vec<usize> {
        vec![<L as WithRole<kind::Width>>::POS]
    }
}

impl<L: WithRole<kind::Height> + WithRole<kind::Width>> SpatialRolesIn<L> for (U0, U1, U1) {
    const ROLES: &'static [SpatialRole] = &[SpatialRole::Height, SpatialRole::Width];
    fn positions() -> Vec<usize> {
        vec![
            <L as WithRole<kind::Height>>::POS,
            <L as WithRole<kind::Width>>::POS,
        ]
    }
}

impl<L> SpatialRolesIn<L> for (U1, U1, U1)
where
    L: WithRole<kind::Depth> + WithRole<kind::Height> + WithRole<kind::Width>,
{
    const ROLES: &'static [SpatialRole] =
        &[SpatialRole::Depth, SpatialRole::Height, SpatialRole::Width];
    fn positions() -> Vec<usize> {
        vec![
            <L as WithRole<kind::Depth>>::POS,
            <L as WithRole<kind::Height>>::POS,
            <L as WithRole<kind::Width>>::POS,
        ]
    }
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
/// role (`Width`; `Height` and `Width`; or `Depth`, `Height` and `Width`), which the input
/// must have too: the window moves along the input's axes with those roles. The input's other
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
}

impl<A, F> ConvolveWith<F> for A
where
    A: AxisSet + WithRole<kind::Channel>,
    A: DifferenceWith<(AxisWithRole<A, kind::Channel>,)>,
    F: AxisSet + DifferenceWith<(AxisWithRole<A, kind::Channel>,)>,
    F::List: Has<AxisWithRole<A, kind::Channel>>,
    <F::List as Has<AxisWithRole<A, kind::Channel>>>::Out:
        FilterHasChannel<AxisWithRole<A, kind::Channel>, F>,
    FilterRest<A, F>: WithRole<kind::Channelout>,
    <FilterRest<A, F> as AxisList>::List:
        CountRole<kind::Depth> + CountRole<kind::Height> + CountRole<kind::Width>,
    SpatialCountsOf<FilterRest<A, F>>: SpatialRolesIn<FilterRest<A, F>> + SpatialRolesIn<A>,
    Difference<A, (AxisWithRole<A, kind::Channel>,)>:
        ConcatWith<(AxisWithRole<FilterRest<A, F>, kind::Channelout>,)>,
    Renamed<A, AxisWithRole<A, kind::Channel>, AxisWithRole<FilterRest<A, F>, kind::Channelout>>:
        AxisSet,
{
    type Channel = AxisWithRole<A, kind::Channel>;
    type Out = AxisWithRole<FilterRest<A, F>, kind::Channelout>;
    type Output = Renamed<A, Self::Channel, Self::Out>;

    fn positions() -> ConvPositions {
        type Counts<A, F> = SpatialCountsOf<FilterRest<A, F>>;
        let channel = std::any::TypeId::of::<Self::Channel>();
        let filter_channel = (F::IDS.iter().position(|&id| id == channel))
            .expect("the filter has the input's Channel axis");
        // A position in the filter's rest, as a position in the filter.
        let in_filter = |p: usize| if p >= filter_channel { p + 1 } else { p };
        let roles = <Counts<A, F> as SpatialRolesIn<A>>::ROLES;
        let input = <Counts<A, F> as SpatialRolesIn<A>>::positions();
        let kernel = <Counts<A, F> as SpatialRolesIn<FilterRest<A, F>>>::positions();
        ConvPositions {
            channel: <A as WithRole<kind::Channel>>::POS,
            filter_channel,
            filter_out: in_filter(<FilterRest<A, F> as WithRole<kind::Channelout>>::POS),
            spatial: (roles.iter().zip(input).zip(kernel))
                .map(|((&role, a), k)| (role, a, in_filter(k)))
                .collect(),
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
