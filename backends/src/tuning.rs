//! How a device's generated kernels are cut: tile shapes, how many work-groups a reduction
//! fills the device with, how many elements a reduction's thread reads a round, and how many
//! work-groups one launch may have. Each backend chooses them for its device; environment
//! variables override them, so that one run on a lent GPU can sweep them (a tuning aid, not
//! a setting to ship), and code can change them when it makes a device
//! (`OpenCl::first_tuned`, `Cuda::new_tuned`):
//!
//! | variable | value | default |
//! |---|---|---|
//! | `AXES_TILE` | `SIDExROWS` (tiles of side², groups of side × rows threads), or `off` | `32x8` on GPUs, `off` on CPU runtimes |
//! | `AXES_REDUCE_GROUPS` | work-groups a reduction wants at least | CUDA: the groups its multiprocessors hold at once; OpenCL 1,024 |
//! | `AXES_REDUCE_UNROLL` | elements a reduction's thread reads a round, 1 to 16 | 4 on GPUs, 1 on CPU runtimes |
//! | `AXES_REDUCE_VECTORS` | `on`: f32 reductions read aligned consecutive elements four at a time; `off` | `on` |
//! | `AXES_MATMUL_BLOCKS` | `on`: matrix products with both sides of 64 or more compute 4 × 4 outputs a thread (64 × 64 a group); `off`: one a thread (16 × 16 a group) | `on` |
//! | `AXES_MAX_GROUPS` | the most work-groups of one launch (kernels loop over the rest) | CUDA 65,535; OpenCL 4,096 |
//!
//! A value that is not one of these is an error naming the variable when the device is made.

use axes_core::error::{Error, Result};
use axes_kernels::REDUCE_UNROLL;
pub use axes_kernels::{MatmulTile, Tile};

/// How a device's generated kernels are cut (see the module's page).
///
/// ```
/// # #[cfg(feature = "opencl")] {
/// use axes_backends::opencl::OpenCl;
/// use axes_backends::tuning::Tile;
///
/// // Tiles on whatever OpenCL device there is (a CPU runtime has none by default).
/// match OpenCl::first_tuned(|tuning| tuning.tile = Some(Tile::DEFAULT)) {
///     Ok(device) => assert_eq!(device.tuning().tile, Some(Tile::DEFAULT)),
///     Err(e) => println!("no OpenCL device: {e}"),
/// }
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tuning {
    /// Tiles for element-wise kernels whose operands disagree on their fastest axis; `None`:
    /// such kernels read or write with a stride instead.
    pub tile: Option<Tile>,
    /// Work-groups a reduction wants at least: few results over many elements are cut into
    /// parts until this many groups run.
    pub reduce_groups: usize,
    /// Elements a reduction's thread reads a round.
    pub reduce_unroll: usize,
    /// Whether reductions of f32 elements read aligned consecutive elements four at a time.
    pub vector_reads: bool,
    /// Whether matrix products with both sides of 64 or more compute a block of outputs a
    /// thread ([`MatmulTile::LARGE`]) instead of one ([`MatmulTile::SMALL`]).
    pub matmul_blocks: bool,
    /// The most work-groups one launch has.
    pub max_groups: usize,
    /// The most local (shared) memory a tiled kernel may take, in bytes.
    pub local_bytes: usize,
    /// The most threads of one work-group (the device's limit).
    pub max_threads: usize,
}

/// The most leaves one tiled kernel stages through local memory (more: not tiled).
pub(crate) const MAX_STAGED: usize = 4;

impl Tuning {
    /// The device's own choices (`tile` where tiles pay on it), each overridden by its
    /// environment variable where set, then changed by `tune`; an error naming a variable
    /// whose value is not one it takes, or a setting the device cannot run.
    pub(crate) fn resolve(mut self, tune: impl FnOnce(&mut Tuning)) -> Result<Tuning> {
        if let Some(value) = var("AXES_TILE") {
            self.tile = parse_tile(&value).ok_or_else(|| {
                invalid(
                    "AXES_TILE",
                    &value,
                    "`off`, or `SIDExROWS` with rows ≤ side ≤ 128, e.g. `32x8`",
                )
            })?;
        }
        if let Some(value) = var("AXES_REDUCE_GROUPS") {
            self.reduce_groups = positive(&value, 1 << 20)
                .ok_or_else(|| invalid("AXES_REDUCE_GROUPS", &value, "1 to 1048576"))?;
        }
        if let Some(value) = var("AXES_REDUCE_UNROLL") {
            self.reduce_unroll = positive(&value, 16)
                .ok_or_else(|| invalid("AXES_REDUCE_UNROLL", &value, "1 to 16"))?;
        }
        if let Some(value) = var("AXES_REDUCE_VECTORS") {
            self.vector_reads = on_off("AXES_REDUCE_VECTORS", &value)?;
        }
        if let Some(value) = var("AXES_MATMUL_BLOCKS") {
            self.matmul_blocks = on_off("AXES_MATMUL_BLOCKS", &value)?;
        }
        if let Some(value) = var("AXES_MAX_GROUPS") {
            // Groups of up to 1,024 threads: a grid's threads stay below 2³¹.
            self.max_groups = positive(&value, 1 << 21)
                .ok_or_else(|| invalid("AXES_MAX_GROUPS", &value, "1 to 2097152"))?;
        }
        tune(&mut self);
        if let Some(tile) = self.tile
            && (tile.threads() > self.max_threads || tile.rows > tile.side || tile.rows == 0)
        {
            return Err(invalid(
                "Tuning::tile",
                &format!("{}x{}", tile.side, tile.rows),
                &format!(
                    "tiles of rows ≤ side and at most {} threads on this device",
                    self.max_threads
                ),
            ));
        }
        if self.reduce_groups == 0 || self.reduce_unroll == 0 || self.max_groups == 0 {
            return Err(invalid(
                "Tuning",
                &format!("{self:?}"),
                "reduction groups, reads and launch groups of at least 1",
            ));
        }
        Ok(self)
    }

    /// The tile of an `m` × `n` matrix product on this device.
    pub(crate) fn matmul_tile(&self, m: usize, n: usize) -> MatmulTile {
        if self.matmul_blocks {
            MatmulTile::for_product(m, n)
        } else {
            MatmulTile::SMALL
        }
    }

    /// The defaults of a device with `resident_groups` reduction groups resident at once,
    /// `max_groups` groups a launch, `local_bytes` of local memory and groups of up to
    /// `max_threads` threads. Both read f32 reductions as vectors where aligned; a GPU also
    /// gets tiles and reductions that read four elements (or vectors) a round, a CPU runtime
    /// (PoCL) neither: tiles cost it at sizes that fit its caches, and four reads a round gain
    /// it little over the vectors alone.
    pub(crate) const fn device(
        gpu: bool,
        resident_groups: usize,
        max_groups: usize,
        local_bytes: usize,
        max_threads: usize,
    ) -> Tuning {
        let tile = Tile::DEFAULT;
        // Half of it at most, and 32 KiB: a tile kernel leaves room for other groups.
        let local_bytes = if local_bytes / 2 < 32 << 10 {
            local_bytes / 2
        } else {
            32 << 10
        };
        Tuning {
            tile: if gpu && tile.side * tile.rows <= max_threads {
                Some(tile)
            } else {
                None
            },
            reduce_groups: if resident_groups > 1 {
                resident_groups
            } else {
                1
            },
            reduce_unroll: if gpu { REDUCE_UNROLL } else { 1 },
            vector_reads: true,
            matmul_blocks: true,
            max_groups,
            local_bytes,
            max_threads,
        }
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// `on` or `off`, else an error naming `setting`.
fn on_off(setting: &str, value: &str) -> Result<bool> {
    match value.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(invalid(setting, value, "`on` or `off`")),
    }
}

fn invalid(setting: &str, value: &str, allowed: &str) -> Error {
    Error::InvalidSetting {
        setting: setting.into(),
        value: value.into(),
        allowed: allowed.into(),
    }
}

/// `off`, or `SIDExROWS`: `None` where the text is neither.
fn parse_tile(value: &str) -> Option<Option<Tile>> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("off") {
        return Some(None);
    }
    let (side, rows) = value.split_once(['x', 'X'])?;
    let side = positive(side, 128)?;
    let rows = positive(rows, side)?;
    Some(Some(Tile { side, rows }))
}

/// A whole number from 1 to `most`.
fn positive(value: &str, most: usize) -> Option<usize> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|&v| (1..=most).contains(&v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_parse_or_are_refused() {
        assert_eq!(parse_tile("off"), Some(None));
        assert_eq!(parse_tile(" 16x4 "), Some(Some(Tile { side: 16, rows: 4 })));
        assert_eq!(parse_tile("32X32"), Some(Some(Tile { side: 32, rows: 32 })));
        for bad in ["", "32", "8x16", "0x1", "x8", "32x", "1000x8", "thirty-two"] {
            assert_eq!(parse_tile(bad), None, "{bad}");
        }
        assert_eq!(positive("4", 16), Some(4));
        assert_eq!(positive("17", 16), None);
        assert_eq!(positive("0", 16), None);
    }

    #[test]
    fn a_device_keeps_its_tiles_within_its_groups() {
        let gpu = Tuning::device(true, 1056, 65_535, 48 << 10, 1024);
        assert_eq!(gpu.tile, Some(Tile::DEFAULT));
        assert_eq!(gpu.local_bytes, 24 << 10);
        // Groups of 128 threads cannot hold 32 × 8.
        assert_eq!(Tuning::device(true, 8, 4096, 1 << 20, 128).tile, None);
        let cpu = Tuning::device(false, 8, 4096, 1 << 20, 1024);
        assert_eq!(
            (cpu.tile, cpu.reduce_unroll, cpu.vector_reads),
            (None, 1, true)
        );
        assert_eq!((gpu.reduce_unroll, gpu.vector_reads), (REDUCE_UNROLL, true));
        for device in [gpu, cpu] {
            assert_eq!(device.matmul_tile(4096, 128), MatmulTile::LARGE);
            assert_eq!(device.matmul_tile(63, 4096), MatmulTile::SMALL);
        }
        let plain = Tuning {
            matmul_blocks: false,
            ..cpu
        };
        assert_eq!(plain.matmul_tile(4096, 128), MatmulTile::SMALL);
    }
}
