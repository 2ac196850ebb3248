//! A device that fails: every read of a tensor on it is an error from the `try_` forms and
//! from `get`, never a panic, and the forms without `try_` panic with the device's message.

use axes::prelude::*;
use axes::protocol::{Backend, DeviceKind, DeviceMemory, Job, WriteTo};

#[derive(Axis)]
struct Row;

/// Keeps what it is given, and fails every read and every job.
struct Lost;

static LOST: Lost = Lost;

impl Backend for Lost {
    fn name(&self) -> String {
        "a lost device".into()
    }
    fn kind(&self) -> DeviceKind {
        DeviceKind::Cuda(7)
    }
    fn upload(&self, bytes: &[u8]) -> axes::Result<DeviceMemory> {
        Ok(DeviceMemory::new(bytes.to_vec(), bytes.len()))
    }
    fn download(&self, _: &DeviceMemory) -> axes::Result<Vec<u8>> {
        Err(axes::Error::Unsupported {
            what: "reading from a lost device".into(),
        })
    }
    fn run(&self, _: &Job<'_>, _: WriteTo<'_>) -> axes::Result<Vec<DeviceMemory>> {
        Err(axes::Error::Unsupported {
            what: "running on a lost device".into(),
        })
    }
}

/// A tensor on the lost device, too large (80 KB) to keep a host copy when uploaded, so every
/// read goes to the device.
fn on_lost_device() -> Tensor<f32, (Row,)> {
    let x = Tensor::<f32, (Row,)>::from_fn(Row.len(20_000), |i| i.of::<Row>() as f32).unwrap();
    x.to(&Device::Backend(&LOST)).unwrap()
}

/// A small tensor copied to a device keeps its host copy: reading it waits for (and needs)
/// nothing on the device.
#[test]
fn small_uploads_read_their_host_copy() {
    let x = Tensor::<f32, (Row,)>::from_vec(Row.len(4), vec![1., 2., 3., 4.]).unwrap();
    let x = x.to(&Device::Backend(&LOST)).unwrap();
    assert_eq!(x.try_to_vec().unwrap(), [1., 2., 3., 4.]);
}

#[test]
fn reads_from_a_failing_device_are_errors() {
    let x = on_lost_device();
    let err = x.try_to_vec().unwrap_err().to_string();
    assert!(err.contains("reading from a lost device"), "{err}");
    let err = x.get(Row.at(1)).unwrap_err().to_string();
    assert!(err.contains("reading from a lost device"), "{err}");
    let reversed = x.slice::<Row>(.., -1).unwrap();
    let err = reversed.contiguous().unwrap_err().to_string();
    assert!(err.contains("running on a lost device"), "{err}");
    let err = x.to(&Device::Cpu).unwrap_err().to_string();
    assert!(err.contains("reading from a lost device"), "{err}");
}

#[test]
#[should_panic(expected = "reading a tensor on cuda:7 (a lost device): ")]
fn to_vec_panics_naming_the_device() {
    let _ = on_lost_device().to_vec();
}
