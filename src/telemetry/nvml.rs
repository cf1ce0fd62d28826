//! NVML (`libnvidia-ml.so.1`), loaded at run time so that the binary runs
//! where there is none: the GPU's clocks, temperature, power, clock-event
//! reasons, utilization, memory and compute processes.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CString};

use libloading::{Library, Symbol};

use super::{GpuProbe, Reading};

type Device = *mut c_void;
type Ret = c_int;

const SUCCESS: Ret = 0;
const INSUFFICIENT_SIZE: Ret = 7;
const CLOCK_SM: c_uint = 1;
const CLOCK_MEM: c_uint = 2;
const TEMPERATURE_GPU: c_uint = 0;

#[repr(C)]
#[derive(Default)]
struct Utilization {
    gpu: c_uint,
    memory: c_uint,
}

#[repr(C)]
#[derive(Default)]
struct Memory {
    total: c_ulonglong,
    free: c_ulonglong,
    used: c_ulonglong,
}

/// `nvmlProcessInfo_t` (v2 and v3 have this layout).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct ProcessInfo {
    pid: c_uint,
    used_gpu_memory: c_ulonglong,
    gpu_instance_id: c_uint,
    compute_instance_id: c_uint,
}

type ClockFn = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> Ret;
type U32Fn = unsafe extern "C" fn(Device, *mut c_uint) -> Ret;
type TempFn = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> Ret;
type ReasonsFn = unsafe extern "C" fn(Device, *mut c_ulonglong) -> Ret;
type UtilFn = unsafe extern "C" fn(Device, *mut Utilization) -> Ret;
type MemFn = unsafe extern "C" fn(Device, *mut Memory) -> Ret;
type ProcFn = unsafe extern "C" fn(Device, *mut c_uint, *mut ProcessInfo) -> Ret;

/// One GPU read through NVML.
pub struct Nvml {
    device: Device,
    clock: ClockFn,
    temperature: TempFn,
    power: U32Fn,
    reasons: ReasonsFn,
    utilization: UtilFn,
    memory: MemFn,
    processes: ProcFn,
    shutdown: unsafe extern "C" fn() -> Ret,
    // Last: the functions above point into it.
    _lib: Library,
}

// SAFETY: NVML is thread-safe; the device handle is an opaque pointer NVML
// owns, used from one thread at a time.
unsafe impl Send for Nvml {}

impl Nvml {
    /// Opens NVML and finds the GPU with PCI bus id `pci` (as CUDA names it;
    /// with `CUDA_VISIBLE_DEVICES` set, CUDA's index is not NVML's), else
    /// the one NVML numbers `index`. The error says what is missing.
    pub fn open(pci: Option<&str>, index: u32) -> Result<Nvml, String> {
        // SAFETY: loading NVML runs no initialization of ours; its
        // functions are called with the types nvml.h declares.
        unsafe {
            let lib = Library::new("libnvidia-ml.so.1")
                .map_err(|e| format!("NVML is not available ({e})"))?;
            let init: Symbol<unsafe extern "C" fn() -> Ret> = sym(&lib, "nvmlInit_v2")?;
            check("nvmlInit_v2", init())?;
            let mut device: Device = std::ptr::null_mut();
            let found = match pci.and_then(|p| CString::new(p).ok()) {
                Some(bus) => {
                    let by_pci: Symbol<unsafe extern "C" fn(*const c_char, *mut Device) -> Ret> =
                        sym(&lib, "nvmlDeviceGetHandleByPciBusId_v2")?;
                    by_pci(bus.as_ptr(), &mut device)
                }
                None => {
                    let by_index: Symbol<unsafe extern "C" fn(c_uint, *mut Device) -> Ret> =
                        sym(&lib, "nvmlDeviceGetHandleByIndex_v2")?;
                    by_index(index, &mut device)
                }
            };
            check("finding the GPU", found)?;
            let reasons: ReasonsFn = match sym(&lib, "nvmlDeviceGetCurrentClocksEventReasons") {
                Ok(f) => *f,
                Err(_) => *sym(&lib, "nvmlDeviceGetCurrentClocksThrottleReasons")?,
            };
            let processes: ProcFn = match sym(&lib, "nvmlDeviceGetComputeRunningProcesses_v3") {
                Ok(f) => *f,
                Err(_) => *sym(&lib, "nvmlDeviceGetComputeRunningProcesses_v2")?,
            };
            let clock: ClockFn = *sym(&lib, "nvmlDeviceGetClockInfo")?;
            let temperature: TempFn = *sym(&lib, "nvmlDeviceGetTemperature")?;
            let power: U32Fn = *sym(&lib, "nvmlDeviceGetPowerUsage")?;
            let utilization: UtilFn = *sym(&lib, "nvmlDeviceGetUtilizationRates")?;
            let memory: MemFn = *sym(&lib, "nvmlDeviceGetMemoryInfo")?;
            let shutdown: unsafe extern "C" fn() -> Ret = *sym(&lib, "nvmlShutdown")?;
            Ok(Nvml {
                device,
                clock,
                temperature,
                power,
                reasons,
                utilization,
                memory,
                processes,
                shutdown,
                _lib: lib,
            })
        }
    }

    fn compute_processes(&self) -> Result<Vec<u32>, String> {
        let mut infos = vec![ProcessInfo::default(); 16];
        loop {
            let mut count = infos.len() as c_uint;
            // SAFETY: `infos` holds `count` entries of the layout NVML writes.
            let ret = unsafe { (self.processes)(self.device, &mut count, infos.as_mut_ptr()) };
            if ret == INSUFFICIENT_SIZE && (count as usize) > infos.len() && infos.len() < 4096 {
                infos.resize(count as usize + 8, ProcessInfo::default());
                continue;
            }
            check("nvmlDeviceGetComputeRunningProcesses", ret)?;
            return Ok(infos[..count as usize].iter().map(|p| p.pid).collect());
        }
    }
}

impl GpuProbe for Nvml {
    fn read(&mut self) -> Result<Reading, String> {
        let d = self.device;
        let (mut sm, mut mem, mut temp, mut power_mw) = (0, 0, 0, 0);
        let mut reasons: c_ulonglong = 0;
        let mut util = Utilization::default();
        let mut memory = Memory::default();
        // SAFETY: each out-pointer is valid for its type; `d` is NVML's.
        unsafe {
            check("SM clock", (self.clock)(d, CLOCK_SM, &mut sm))?;
            check("memory clock", (self.clock)(d, CLOCK_MEM, &mut mem))?;
            check(
                "temperature",
                (self.temperature)(d, TEMPERATURE_GPU, &mut temp),
            )?;
            // Power and utilization are not supported on every board.
            let _ = (self.power)(d, &mut power_mw);
            check("clock-event reasons", (self.reasons)(d, &mut reasons))?;
            let _ = (self.utilization)(d, &mut util);
            let _ = (self.memory)(d, &mut memory);
        }
        Ok(Reading {
            sm_mhz: sm,
            mem_mhz: mem,
            temp_c: temp,
            power_w: f64::from(power_mw) / 1e3,
            reasons,
            util_pct: util.gpu,
            mem_used_bytes: memory.used,
            processes: self.compute_processes().unwrap_or_default(),
        })
    }
}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: balanced with the nvmlInit_v2 of `open`.
        unsafe {
            (self.shutdown)();
        }
    }
}

/// # Safety
/// `T` must be the symbol's type as nvml.h declares it.
unsafe fn sym<'l, T>(lib: &'l Library, name: &str) -> Result<Symbol<'l, T>, String> {
    // SAFETY: forwarded to the caller.
    unsafe { lib.get(name.as_bytes()) }.map_err(|e| format!("NVML has no {name} ({e})"))
}

fn check(what: &str, ret: Ret) -> Result<(), String> {
    if ret == SUCCESS {
        Ok(())
    } else {
        Err(format!("NVML: {what} failed (nvmlReturn_t {ret})"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_machine_without_nvml_gets_a_reason_not_a_crash() {
        // Where NVML exists this reads the GPU; where not, it says so.
        match super::Nvml::open(None, 0) {
            Ok(mut nvml) => {
                use super::GpuProbe;
                let r = nvml.read().expect("an opened GPU reads");
                assert!(r.sm_mhz > 0);
            }
            Err(why) => assert!(why.contains("NVML"), "{why}"),
        }
    }
}
