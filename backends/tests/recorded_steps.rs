//! Recorded training steps against plain ones on the host (where the closure runs at every
//! step), the CPU backend and, where there are, OpenCL and CUDA (its replays launched as CUDA
//! graphs): one test, so that no other test's launches count in its counters.

mod common;

use axes::Device;
use axes_backends::cpu::CPU_BACKEND;

#[test]
fn recorded_steps_match_plain_steps_and_misuse_is_named() {
    let mut devices = vec![Device::Cpu, Device::Backend(&CPU_BACKEND)];
    #[cfg(feature = "opencl")]
    devices.extend(common::opencl_device().map(|cl| Device::Backend(cl)));
    #[cfg(feature = "cuda")]
    let cuda = match axes_backends::cuda::Cuda::shared(0) {
        Ok(cuda) => {
            devices.push(Device::Backend(cuda));
            Some(cuda)
        }
        Err(e) => {
            println!("SKIPPED on CUDA (no CUDA device): {e}");
            None
        }
    };
    for device in devices {
        if device != Device::Cpu {
            common::record::recorded_step_errors(&device);
        }
        let replays = common::record::recorded_steps_match_plain(&device, 50);
        println!("{replays} MLP replays matched plain steps bit for bit on {device}");
        // Clipping to 1e-3 scales every step's gradient; to 1e3, none.
        for max_norm in [1e-3, 1e3] {
            let start = std::time::Instant::now();
            let replays = common::record::recorded_gpt_steps_match_plain(&device, 50, max_norm);
            let seconds = start.elapsed().as_secs_f64();
            println!(
                "{replays} GPT replays (clipped to {max_norm}) matched plain steps bit for bit \
                 on {device} in {seconds:.1} s"
            );
        }
    }
    // Every recording was captured as a graph, which each replay launched.
    #[cfg(feature = "cuda")]
    if let Some(cuda) = cuda {
        assert_eq!(
            cuda.graph_error(),
            None,
            "a recording not captured as a graph"
        );
    }
}
