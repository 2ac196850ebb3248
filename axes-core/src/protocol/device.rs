//! Where a tensor's elements live: the CPU or a backend's device.

use std::fmt;

use super::{Backend, DeviceCounters};

/// Where a tensor's elements live and where expressions over it run.
///
/// Cheap to copy. Two backend devices are equal when they are the same backend instance
/// (backends keep one per physical device).
#[derive(Clone, Copy)]
pub enum Device {
    /// Host memory; the CPU engine runs.
    Cpu,
    /// A device run by a backend through the device protocol: a GPU (made by `axes_backends`,
    /// e.g. `Cuda::device(0)`), or the CPU backend that tests the protocol on the host.
    Backend(&'static dyn Backend),
}

/// What kind of device, and which one: for matching and messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    /// The host.
    Cpu,
    /// CUDA device `ordinal`.
    Cuda(usize),
    /// OpenCL device `index` (in the runtime's list).
    OpenCl(usize),
}

impl Device {
    /// The kind of device and its number.
    pub fn kind(&self) -> DeviceKind {
        match self {
            Device::Cpu => DeviceKind::Cpu,
            Device::Backend(backend) => backend.kind(),
        }
    }

    /// Whether this is host memory run by the CPU engine ([`Device::Cpu`]); false for every
    /// backend's device, the CPU backend's included.
    pub fn is_host(&self) -> bool {
        matches!(self, Device::Cpu)
    }

    /// The device's work so far — launches, bytes its buffers hold now and at most, its
    /// pool's hits, misses and held bytes — where its backend counts them (the CPU, OpenCL
    /// and CUDA do). On the CPU, `bytes` are those of the tensors' buffers in host memory,
    /// and the pool is the host pool ([`crate::memory::set_pool_limit`]).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::prelude::*;
    /// #[derive(Axis)] struct Sample;
    /// let before = Device::Cpu.counters().unwrap();
    /// let x = Tensor::<f32, (Sample,)>::zeros(Sample.len(1000))?;
    /// let after = Device::Cpu.counters().unwrap();
    /// assert!(after.peak_bytes >= 4000);
    /// assert!(after.pool_hits + after.pool_misses > before.pool_hits + before.pool_misses);
    /// # drop(x);
    /// # Ok::<(), axes::Error>(())
    /// ```
    pub fn counters(&self) -> Option<DeviceCounters> {
        match self {
            Device::Cpu => Some(super::meter::HOST_METER.counters()),
            Device::Backend(backend) => backend.counters(),
        }
    }

    /// Waits until the work queued on the device is done: reads of a tensor's elements wait
    /// by themselves, so this is only for timing.
    pub fn synchronize(&self) -> crate::error::Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Backend(backend) => backend.synchronize(),
        }
    }

    /// Lets this device's f32 products (`dot`, `dot_over`, linear layers) round their
    /// operands to TF32 — 10 bits of significand instead of 23, the range of f32, products
    /// summed in f32 — or stops them (the default); whether the device does so. As PyTorch's
    /// `torch.backends.cuda.matmul.allow_tf32`: on CUDA, cuBLAS's products run on the tensor
    /// cores (on an H100 several times SGEMM's rate), each result off by at most about
    /// 2⁻¹⁰ · Σₖ |aᵢₖ · bₖⱼ| (each operand's rounding, 2⁻¹¹ relative, on both sides) where
    /// f32 is off by 2⁻²³ times as much per term. Elsewhere (the host, OpenCL, CUDA's own
    /// kernels for products cuBLAS does not take) f32 products stay f32, and this returns
    /// false.
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::Device;
    /// assert!(!Device::Cpu.allow_tf32(true)); // ignored: the host computes in f32
    /// ```
    pub fn allow_tf32(&self, allowed: bool) -> bool {
        match self {
            Device::Cpu => false,
            Device::Backend(backend) => backend.allow_tf32(allowed),
        }
    }

    /// Starts a new peak of [`Device::counters`] from the bytes held now.
    pub fn reset_peak(&self) {
        match self {
            Device::Cpu => super::meter::HOST_METER.reset_peak(),
            Device::Backend(backend) => {
                if let Some(meter) = backend.meter() {
                    meter.reset_peak();
                }
            }
        }
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        match (self, other) {
            (Device::Cpu, Device::Cpu) => true,
            (Device::Backend(a), Device::Backend(b)) => std::ptr::addr_eq(*a, *b),
            _ => false,
        }
    }
}

impl Eq for Device {}

impl fmt::Display for Device {
    /// `cpu`, `cuda:0 (NVIDIA H100 80GB HBM3)`, `opencl:0 (pthread-…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Backend(backend) => match backend.kind() {
                DeviceKind::Cuda(n) => write!(f, "cuda:{n} ({})", backend.name()),
                DeviceKind::OpenCl(n) => write!(f, "opencl:{n} ({})", backend.name()),
                DeviceKind::Cpu => write!(f, "cpu ({})", backend.name()),
            },
        }
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
