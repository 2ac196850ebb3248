//! Recorded training steps against plain ones on the host (where the closure runs at every
//! step), the CPU backend and, where there is one, OpenCL: one test, so that no other test's
//! launches count in its counters.

mod common;

use axes::Device;
use axes_backends::cpu::CPU_BACKEND;

#[test]
fn recorded_steps_match_plain_steps_and_misuse_is_named() {
    let mut devices = vec![Device::Cpu, Device::Backend(&CPU_BACKEND)];
    #[cfg(feature = "opencl")]
    devices.extend(common::opencl_device().map(|cl| Device::Backend(cl)));
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
}
