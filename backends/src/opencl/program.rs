//! Programs: built once per source on the device, from the binary an earlier process kept on
//! disk where there is one, else from the source (its binary kept once its first launches
//! ran).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axes_core::error::{Error, Result};
use axes_kernels::{Dialect, Kernel};
use opencl3::device::Device;
use opencl3::program::Program;

use super::OpenCl;

/// What an OpenCL program binary for `device` depends on besides its source, one field a line.
pub(super) fn binary_key(device: &Device) -> String {
    let platform = device
        .platform()
        .map(opencl3::platform::Platform::new)
        .map(|p| {
            (
                p.name().unwrap_or_default(),
                p.version().unwrap_or_default(),
            )
        });
    let (platform, platform_version) = platform.unwrap_or_default();
    format!(
        "opencl\n{platform}\n{platform_version}\n{}\n{}\n{}\n",
        device.name().unwrap_or_default(),
        device.version().unwrap_or_default(),
        device.driver_version().unwrap_or_default(),
    )
}

impl OpenCl {
    /// The compiled program of `kernel` (built once per source on this device: from the
    /// binary an earlier process kept on disk where there is one, else from the source).
    pub(super) fn program(&self, kernel: &Kernel) -> Result<Arc<Program>> {
        if kernel.dialect != Dialect::OpenCl {
            return Err(Error::Unsupported {
                what: "OpenCL: a kernel in the CUDA dialect".into(),
            });
        }
        self.meter.looked_up();
        let mut cache = self
            .programs
            .lock()
            .expect("the kernel cache is never poisoned");
        if let Some(program) = cache.get(&kernel.source) {
            return Ok(Arc::clone(program));
        }
        let key = format!("{}{}", self.binary_key, kernel.source);
        let kept = (self.disk.load(&key)).and_then(|binary| {
            Program::create_and_build_from_binary(&self.context, &[&binary], "").ok()
        });
        let program = match kept {
            Some(program) => Arc::new(program),
            None => {
                let program =
                    Program::create_and_build_from_source(&self.context, &kernel.source, "")
                        .map_err(|log| Error::Unsupported {
                            what: format!(
                                "OpenCL: kernel `{}` did not build:\n{log}\n--- source ---\n{}",
                                kernel.name, kernel.source
                            ),
                        })?;
                self.source_builds.fetch_add(1, Ordering::Relaxed);
                let program = Arc::new(program);
                if self.disk.is_on() {
                    let mut unkept = self.unkept.lock().expect("never poisoned");
                    unkept.push((key, Arc::clone(&program)));
                }
                program
            }
        };
        cache.insert(kernel.source.clone(), Arc::clone(&program));
        Ok(program)
    }

    /// Puts the binaries of the programs built from source since the last call on disk.
    /// Called when the queue is drained (every launch before has run), so each binary holds
    /// what the runtime compiled for those launches.
    pub(super) fn keep_binaries(&self) {
        let unkept = std::mem::take(&mut *self.unkept.lock().expect("never poisoned"));
        for (key, program) in unkept {
            if let Some(binary) = program.get_binaries().ok().and_then(|mut b| b.pop()) {
                self.disk.store(&key, &binary);
            }
        }
    }

    /// How many programs this object built from source rather than from a binary kept on
    /// disk.
    #[cfg(test)]
    pub(crate) fn built_from_source(&self) -> usize {
        self.source_builds.load(Ordering::Relaxed)
    }

    /// Whether `kernel`'s program is already built on this device.
    pub fn is_cached(&self, kernel: &Kernel) -> bool {
        let cache = self
            .programs
            .lock()
            .expect("the kernel cache is never poisoned");
        cache.contains_key(&kernel.source)
    }
}
