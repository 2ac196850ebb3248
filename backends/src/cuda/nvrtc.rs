//! NVRTC: CUDA C compiled to PTX and to cubins for a device's architecture.

use axes_core::error::{Error, Result};
use axes_kernels::{Dialect, Kernel};
use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};

use super::present;

/// `Ok` when NVRTC (libnvrtc) can be loaded, else why not.
pub fn nvrtc_available() -> Result<()> {
    // SAFETY: only tries to open the library by its candidate names.
    let found = unsafe { cudarc::nvrtc::sys::is_culib_present() };
    present(
        found,
        "NVRTC (libnvrtc.so.13) is not on the library path; install the `nvidia-cuda-nvrtc` \
         wheel or the CUDA toolkit and add its lib folder to LD_LIBRARY_PATH",
    )
}

/// PTX for `kernel` compiled by NVRTC for the virtual architecture `arch` (e.g.
/// `"compute_90"`). A compile error shows NVRTC's log and the generated source.
pub fn compile_ptx(kernel: &Kernel, arch: &'static str) -> Result<String> {
    if kernel.dialect != Dialect::Cuda {
        return Err(Error::Unsupported {
            what: "CUDA: a kernel in the OpenCL dialect".into(),
        });
    }
    nvrtc_available()?;
    let options = CompileOptions {
        arch: Some(arch),
        name: Some(format!("{}.cu", kernel.name)),
        ..Default::default()
    };
    compile_ptx_with_opts(&kernel.source, options)
        .map(|ptx| ptx.to_src())
        .map_err(|e| {
            let log = match &e {
                CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                other => format!("{other:?}"),
            };
            Error::Unsupported {
                what: format!(
                    "CUDA: NVRTC could not compile `{}` for {arch}:\n{log}\n--- source ---\n{}",
                    kernel.name, kernel.source
                ),
            }
        })
}

/// The NVRTC architecture name of a compute capability.
pub(super) fn arch_of(major: i32, minor: i32) -> &'static str {
    match (major, minor) {
        (7, 0) => "compute_70",
        (7, 5) => "compute_75",
        (8, 0) => "compute_80",
        (8, 6) => "compute_86",
        (8, 9) => "compute_89",
        (9, 0) => "compute_90",
        (10, _) => "compute_100",
        (12, _) => "compute_120",
        (8, _) => "compute_80",
        _ => "compute_75",
    }
}

/// A cubin for `kernel`, compiled by NVRTC for the real architecture `sm` (e.g. `"sm_90"`):
/// code the driver loads without translating it. A compile error shows NVRTC's log.
pub fn compile_cubin(kernel: &Kernel, sm: &str) -> Result<Vec<u8>> {
    use cudarc::nvrtc::{result, sys};
    nvrtc_available()?;
    let failed = |what: &str, e: &dyn std::fmt::Debug| Error::Unsupported {
        what: format!("CUDA: NVRTC {what} `{}` for {sm}: {e:?}", kernel.name),
    };
    let source = std::ffi::CString::new(kernel.source.as_str())
        .map_err(|e| failed("could not take the source of", &e))?;
    let program =
        result::create_program(&source, None).map_err(|e| failed("could not start", &e))?;
    let options = [format!("--gpu-architecture={sm}")];
    // SAFETY: `program` was just created and is destroyed only below; `source` outlives it.
    let compiled = unsafe { result::compile_program(program, &options) };
    let cubin = compiled
        .map_err(|e| {
            // SAFETY: as above.
            let log = unsafe { result::get_program_log(program) }.unwrap_or_default();
            let log: Vec<u8> = log
                .iter()
                .map(|&c| c as u8)
                .take_while(|&c| c != 0)
                .collect();
            let log = String::from_utf8_lossy(&log);
            failed("could not compile", &format!("{e:?}\n{log}"))
        })
        .and_then(|()| {
            let mut size = 0usize;
            // SAFETY: `program` compiled; NVRTC writes the cubin's size into `size`, then
            // exactly that many bytes into a buffer of that size.
            unsafe {
                sys::nvrtcGetCUBINSize(program, &mut size)
                    .result()
                    .map_err(|e| failed("has no cubin of", &e))?;
                let mut cubin = vec![0u8; size];
                sys::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast())
                    .result()
                    .map_err(|e| failed("has no cubin of", &e))?;
                Ok(cubin)
            }
        });
    // SAFETY: created above, not destroyed before.
    unsafe { result::destroy_program(program) }.ok();
    cubin
}

/// NVRTC's version and the driver's, a line each: what compiled code depends on besides its
/// source and architecture.
pub(super) fn compiler_versions() -> String {
    let (mut major, mut minor, mut driver) = (0, 0, 0);
    // SAFETY: each call writes plain integers through the pointers it is given.
    unsafe {
        cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor)
            .result()
            .ok();
        cudarc::driver::sys::cuDriverGetVersion(&mut driver)
            .result()
            .ok();
    }
    format!("nvrtc {major}.{minor}\ndriver {driver}\n")
}
