//! Collectives between CUDA devices through NCCL (cargo feature `nccl`): the all-reduce and
//! broadcast that data-parallel training runs on a whole gradient buffer where it lives. Each
//! collective is queued on the device's one stream, after the kernels that computed its input
//! and before those that read its result, so nothing waits on the host and nothing is copied
//! through it.
//!
//! NCCL is loaded at run time (cudarc, dynamic loading). [`nccl_available`] says whether it
//! can be, and [`NcclId::new`] and [`Nccl::new`] check it first, so a machine without NCCL
//! gets an error, never a panic. cudarc looks for `libnccl.so`, not NCCL's soname
//! `libnccl.so.2`: where only the latter is installed, a symlink `libnccl.so → libnccl.so.2`
//! on the library path makes it found. NCCL refuses two ranks on one GPU: a communicator of
//! `N` ranks needs `N` devices.
//!
//! Status: this module is compiled and its probe tested in CI, which has no GPU; it has not
//! yet run on a GPU.
//!
//! ```
//! match axes_backends::nccl::nccl_available() {
//!     Ok(()) => println!("NCCL found"),
//!     Err(why) => assert!(why.to_string().contains("libnccl")),
//! }
//! ```

use std::ffi::c_char;

use axes_core::error::{Error, Result};
use axes_core::protocol::DeviceMemory;
use axes_core::{DType, Device, Element, Storage};
use cudarc::driver::CudaSlice;
use cudarc::nccl::safe::{Comm, Id, NcclType, ReduceOp};

use crate::cuda::{Cuda, cuda_error, foreign, present};

/// `Ok` when NCCL (libnccl) can be loaded, else why not.
pub fn nccl_available() -> Result<()> {
    // SAFETY: only tries to open the library by its candidate names.
    let found = unsafe { cudarc::nccl::sys::is_culib_present() };
    present(
        found,
        "NCCL (libnccl.so) is not on the library path; install NCCL (e.g. the `nvidia-nccl-cu13` \
         wheel or the distribution's libnccl2) and, where only `libnccl.so.2` exists, link \
         `libnccl.so` to it",
    )
}

/// The rendezvous token of one NCCL communicator: rank 0 makes it, every other rank receives
/// its bytes (e.g. through an MPI broadcast), and all pass it to [`Nccl::new`].
#[derive(Clone, Copy)]
pub struct NcclId([u8; 128]);

impl NcclId {
    /// A new token (NCCL opens the socket that the ranks meet at); an error without NCCL.
    pub fn new() -> Result<NcclId> {
        nccl_available()?;
        let id = Id::new().map_err(|e| cuda_error("NCCL unique id", e))?;
        Ok(NcclId(id.internal().map(|c| c as u8)))
    }

    /// The token as bytes, to send to the other ranks.
    pub fn to_bytes(self) -> [u8; 128] {
        self.0
    }

    /// The token that [`NcclId::to_bytes`] gave on rank 0.
    pub fn from_bytes(bytes: [u8; 128]) -> NcclId {
        NcclId(bytes)
    }
}

impl std::fmt::Debug for NcclId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NcclId(..)")
    }
}

/// How [`Nccl::all_reduce`] combines the ranks' elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// The element-wise sum.
    Sum,
    /// The element-wise mean (floating-point elements only).
    Mean,
}

/// One rank of an NCCL communicator, on one CUDA device.
pub struct Nccl {
    comm: Comm,
    cuda: &'static Cuda,
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Nccl(rank {} of {}, {})",
            self.rank(),
            self.size(),
            self.device()
        )
    }
}

impl Nccl {
    /// Rank `rank` of `size` on CUDA device `ordinal`, meeting the others at `id`. Every rank
    /// calls it with the same `id` and `size`; it returns when all have (NCCL's rendezvous).
    /// An error without NCCL or the device, or when `rank` is not below `size`.
    pub fn new(ordinal: usize, rank: usize, size: usize, id: NcclId) -> Result<Nccl> {
        if rank >= size {
            return Err(Error::Unsupported {
                what: format!("NCCL: rank {rank} of a communicator of {size}"),
            });
        }
        nccl_available()?;
        let cuda = Cuda::shared(ordinal)?;
        let id = Id::uninit(id.0.map(|b| b as c_char));
        let comm = Comm::from_rank(cuda.stream().clone(), rank, size, id)
            .map_err(|e| cuda_error("NCCL communicator", e))?;
        Ok(Nccl { comm, cuda })
    }

    /// This rank, in `0..size`.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of ranks.
    pub fn size(&self) -> usize {
        self.comm.world_size()
    }

    /// The device whose buffers this rank's collectives take and return.
    pub fn device(&self) -> Device {
        Device::Backend(self.cuda)
    }

    /// The element-wise sum or mean of `storage` over every rank, in a new buffer on the same
    /// device (queued on its stream). `storage` must be on this rank's device; `Mean` needs
    /// floating-point elements, `Sum` numbers (not `bool`).
    pub fn all_reduce<T: Element>(
        &self,
        storage: &Storage<T>,
        reduction: Reduction,
    ) -> Result<Storage<T>> {
        let floating = matches!(T::DTYPE, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
        if T::DTYPE == DType::Bool || (reduction == Reduction::Mean && !floating) {
            return Err(Error::Unsupported {
                what: format!("NCCL: the {reduction:?} of {} elements", T::DTYPE.name()),
            });
        }
        let op = match reduction {
            Reduction::Sum => ReduceOp::Sum,
            Reduction::Mean => ReduceOp::Avg,
        };
        self.collective(storage, |input, out, len| match T::DTYPE {
            DType::F32 => reduce::<f32>(&self.comm, input, out, len, &op),
            DType::F64 => reduce::<f64>(&self.comm, input, out, len, &op),
            DType::F16 => reduce::<half::f16>(&self.comm, input, out, len, &op),
            DType::BF16 => reduce::<half::bf16>(&self.comm, input, out, len, &op),
            DType::I32 => reduce::<i32>(&self.comm, input, out, len, &op),
            DType::I64 => reduce::<i64>(&self.comm, input, out, len, &op),
            DType::U8 | DType::Bool => reduce::<u8>(&self.comm, input, out, len, &op),
        })
    }

    /// Rank `root`'s `storage`, in a new buffer on every rank (each passes a buffer of the
    /// same length on its device).
    pub fn broadcast<T: Element>(&self, storage: &Storage<T>, root: usize) -> Result<Storage<T>> {
        if root >= self.size() {
            return Err(Error::Unsupported {
                what: format!("NCCL: broadcast from rank {root} of {}", self.size()),
            });
        }
        self.collective(storage, |input, out, len| {
            let bytes = len * T::DTYPE.size();
            // SAFETY: both buffers hold `bytes` bytes (checked by `collective`); u8 has no
            // invalid bit patterns.
            let (input, mut out) =
                unsafe { (input.transmute::<u8>(bytes), out.transmute_mut(bytes)) };
            let (Some(input), Some(out)) = (input, out.as_mut()) else {
                return Err(short_buffer());
            };
            self.comm
                .broadcast(Some(&input), out, root as i32)
                .map(drop)
                .map_err(|e| cuda_error("NCCL broadcast", e))
        })
    }

    /// Runs `queue(input, output, len)` for `storage`'s buffer and a fresh one of its size,
    /// and returns the fresh one as storage of `len` elements.
    fn collective<T: Element>(
        &self,
        storage: &Storage<T>,
        queue: impl FnOnce(&CudaSlice<u8>, &mut CudaSlice<u8>, usize) -> Result<()>,
    ) -> Result<Storage<T>> {
        if storage.device() != self.device() {
            return Err(Error::DeviceMismatch {
                left: storage.device().to_string(),
                right: self.device().to_string(),
            });
        }
        self.cuda.not_recording("an NCCL collective")?;
        let memory = storage.device_memory().ok_or_else(foreign)?;
        let input: &CudaSlice<u8> = memory.buffer().ok_or_else(foreign)?;
        let (len, bytes) = (storage.len(), memory.bytes());
        if input.len() < bytes {
            return Err(short_buffer());
        }
        let mut out = self.cuda.result_buffer(bytes)?;
        if len > 0 {
            queue(input, &mut out, len)?;
        }
        let memory: DeviceMemory = self.cuda.metered_memory(out, bytes);
        Storage::from_device_memory(self.device(), memory, len)
    }
}

/// Queues the all-reduce of `len` elements of `T` from `input` into `out`.
fn reduce<T: NcclType>(
    comm: &Comm,
    input: &CudaSlice<u8>,
    out: &mut CudaSlice<u8>,
    len: usize,
    op: &ReduceOp,
) -> Result<()> {
    // SAFETY: both buffers hold at least `len` elements of `T` (checked by `collective`),
    // written by the core or a kernel; every bit pattern of these number types is valid.
    let (input, mut out) = unsafe { (input.transmute::<T>(len), out.transmute_mut::<T>(len)) };
    let (Some(input), Some(out)) = (input, out.as_mut()) else {
        return Err(short_buffer());
    };
    comm.all_reduce(&input, out, op)
        .map(drop)
        .map_err(|e| cuda_error("NCCL all-reduce", e))
}

/// The error for a device buffer smaller than its elements.
fn short_buffer() -> Error {
    Error::Unsupported {
        what: "NCCL: a device buffer smaller than its elements".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axes_core::protocol::Backend;

    /// `values` (given as their bytes) in a buffer on `cuda`'s device.
    fn on_device<T: Element>(cuda: &'static Cuda, values: &[T], bytes: Vec<u8>) -> Storage<T> {
        let memory = Backend::upload(cuda, &bytes).unwrap();
        Storage::from_device_memory(Device::Backend(cuda), memory, values.len()).unwrap()
    }

    /// Without NCCL every entry point is an error naming the library (never a panic); with it
    /// and a GPU, a communicator of one rank sums and averages to its input and broadcasts it.
    #[test]
    fn absent_nccl_is_an_error_and_one_rank_reduces_to_its_input() {
        if let Err(why) = nccl_available() {
            let message = why.to_string();
            assert!(message.contains("libnccl.so"), "{message}");
            assert_eq!(NcclId::new().unwrap_err().to_string(), message);
            let comm = Nccl::new(0, 0, 1, NcclId::from_bytes([0; 128])).unwrap_err();
            assert_eq!(comm.to_string(), message);
            println!("SKIPPED the one-rank NCCL run: {message}");
            return;
        }
        let cuda = match Cuda::shared(0) {
            Ok(cuda) => cuda,
            Err(why) => {
                // NCCL loads; what needs a device fails cleanly.
                let comm = NcclId::new().and_then(|id| Nccl::new(0, 0, 1, id));
                assert_eq!(comm.unwrap_err().to_string(), why.to_string());
                println!("SKIPPED the one-rank NCCL run: NCCL is present but {why}");
                return;
            }
        };
        let nccl = Nccl::new(0, 0, 1, NcclId::new().unwrap()).unwrap();
        assert_eq!((nccl.rank(), nccl.size()), (0, 1));
        let values: Vec<f32> = (0..1000).map(|k| k as f32 * 0.25 - 7.0).collect();
        let bytes = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let floats = on_device(cuda, &values, bytes);
        for reduction in [Reduction::Sum, Reduction::Mean] {
            let reduced = nccl.all_reduce(&floats, reduction).unwrap();
            assert_eq!(reduced.device(), nccl.device());
            assert_eq!(reduced.host().unwrap(), values, "{reduction:?}");
        }
        assert_eq!(nccl.broadcast(&floats, 0).unwrap().host().unwrap(), values);
        assert!(nccl.broadcast(&floats, 1).is_err());
        let ints = [3i32, -4];
        let int_bytes = ints.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let ints_there = on_device(cuda, &ints, int_bytes);
        assert!(nccl.all_reduce(&ints_there, Reduction::Mean).is_err());
        let summed = nccl.all_reduce(&ints_there, Reduction::Sum).unwrap();
        assert_eq!(summed.host().unwrap(), ints);
        let on_host = Storage::new(values);
        assert!(nccl.all_reduce(&on_host, Reduction::Sum).is_err());
        assert!(Nccl::new(0, 1, 1, NcclId::new().unwrap()).is_err());
        println!(
            "ran the one-rank NCCL all-reduce and broadcast on {}",
            nccl.device()
        );
    }
}
