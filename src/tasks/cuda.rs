//! libtorch's CUDA side, set up once per process.
//!
//! rustc links with `--as-needed`, and nothing in the binary names a symbol of
//! `libtorch_cuda.so`, so the linker drops it and libtorch reports "Could not
//! run … with arguments from the 'CUDA' backend". Loading it with
//! `RTLD_GLOBAL` before the first CUDA tensor registers the CUDA kernels.

use std::sync::OnceLock;

use super::error::TaskError;

/// Loads `libtorch_cuda.so` once (a CPU-only machine has none, which is fine
/// until a task asks for CUDA) and says whether it was found.
pub fn load_torch_cuda() -> bool {
    static LOADED: OnceLock<bool> = OnceLock::new();
    *LOADED.get_or_init(|| {
        // SAFETY: dlopen with a valid C string; the handle is kept for the
        // life of the process.
        let handle = unsafe {
            libc::dlopen(
                c"libtorch_cuda.so".as_ptr(),
                libc::RTLD_NOW | libc::RTLD_GLOBAL,
            )
        };
        !handle.is_null()
    })
}

/// The tch device for `cuda:index`, or an error that says why CUDA cannot
/// be used here.
pub fn cuda_device(index: u32) -> Result<tch::Device, TaskError> {
    let help = "run on a machine with an NVIDIA GPU and PyTorch's CUDA libraries on LD_LIBRARY_PATH, or set `device: \"cpu\"`";
    if !load_torch_cuda() {
        return Err(TaskError::unavailable(
            "cuda",
            "`device` asks for CUDA, but libtorch_cuda.so is not on the library path",
            help,
        ));
    }
    if !tch::Cuda::is_available() {
        return Err(TaskError::unavailable(
            "cuda",
            "`device` asks for CUDA, but libtorch sees no GPU",
            help,
        ));
    }
    let count = tch::Cuda::device_count();
    if i64::from(index) >= count {
        return Err(TaskError::unavailable(
            "cuda",
            format!("`device` asks for cuda:{index}, but only {count} GPU(s) are visible"),
            "use a lower device index; the engine hands each task its GPU as cuda:0",
        ));
    }
    Ok(tch::Device::Cuda(index as usize))
}

/// Device memory in use (total − free), as the driver reports it; `None`
/// where the driver library cannot be loaded.
pub fn device_memory_used() -> Option<u64> {
    // cudarc panics when it cannot load libcuda; keep that from ending the task.
    std::panic::catch_unwind(|| cudarc::driver::result::mem_get_info().ok())
        .ok()
        .flatten()
        .map(|(free, total)| (total - free) as u64)
}

/// The PCI bus id of CUDA device `index` (`00000000:19:00.0`), as NVML
/// takes it; `None` where the driver cannot say.
pub fn pci_bus_id(index: usize) -> Option<String> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    std::panic::catch_unwind(|| {
        cudarc::driver::result::init().ok()?;
        let dev = cudarc::driver::result::device::get(index as i32).ok()?;
        // SAFETY: `dev` came from cuDeviceGet.
        let attr = |a| unsafe { cudarc::driver::result::device::get_attribute(dev, a) }.ok();
        let domain = attr(A::CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?;
        let bus = attr(A::CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?;
        let device = attr(A::CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?;
        Some(format!("{domain:08x}:{bus:02x}:{device:02x}.0"))
    })
    .ok()
    .flatten()
}

/// Peak resident memory of this process (`VmHWM`), for CPU runs.
pub fn host_peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

pub(crate) fn driver_error(what: &str) -> impl Fn(cudarc::driver::DriverError) -> TaskError + '_ {
    move |e| TaskError::Torch {
        during: what.to_owned(),
        message: format!("{e:?}"),
    }
}

/// Back-to-back events: the end of one repetition is the start of the next,
/// so no gap between repetitions goes untimed or is timed twice.
pub(crate) struct Events(pub(crate) Vec<cudarc::driver::sys::CUevent>);

impl Events {
    pub(crate) fn new(n: usize) -> Result<Events, TaskError> {
        let mut events = Events(Vec::with_capacity(n));
        for _ in 0..n {
            let e = std::panic::catch_unwind(|| {
                cudarc::driver::result::event::create(
                    cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT,
                )
            })
            .map_err(|_| {
                TaskError::unavailable(
                    "cuda",
                    "libcuda could not be loaded to create CUDA events",
                    "run on a machine with an NVIDIA driver",
                )
            })?
            .map_err(driver_error("creating a CUDA event"))?;
            events.0.push(e);
        }
        Ok(events)
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        for e in &self.0 {
            // SAFETY: created by `event::create` and destroyed once.
            let _ = unsafe { cudarc::driver::result::event::destroy(*e) };
        }
    }
}

/// The device time of work launched between [`EventTimer::start`] and
/// [`EventTimer::stop`] on the legacy default stream (the one libtorch
/// launches on from a thread that set no stream), read once the work is
/// done: CUDA events, as the PyTorch reference times a forward pass.
pub(crate) struct EventTimer(Events);

impl EventTimer {
    /// None where the driver cannot be loaded or an event not created.
    pub(crate) fn new() -> Option<EventTimer> {
        Events::new(2).ok().map(EventTimer)
    }

    pub(crate) fn start(&self) -> bool {
        // SAFETY: a valid event of the current context; null is the legacy default stream.
        unsafe { cudarc::driver::result::event::record(self.0 .0[0], std::ptr::null_mut()) }.is_ok()
    }

    pub(crate) fn stop(&self) -> bool {
        // SAFETY: as in `start`.
        unsafe { cudarc::driver::result::event::record(self.0 .0[1], std::ptr::null_mut()) }.is_ok()
    }

    /// The milliseconds between the two events, waiting for the second.
    pub(crate) fn elapsed_ms(&self) -> Option<f64> {
        let (start, stop) = (self.0 .0[0], self.0 .0[1]);
        // SAFETY: both events were recorded on this context.
        unsafe { cudarc::driver::result::event::synchronize(stop) }.ok()?;
        unsafe { cudarc::driver::result::event::elapsed(start, stop) }
            .ok()
            .map(f64::from)
    }
}
