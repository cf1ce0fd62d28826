"""What one timestamp costs on this host: CUPTI's clock (cuptiGetTimestamp)
against clock_gettime with the clocks CUPTI could use, in ns per call
(called through ctypes, so each figure includes ctypes' own overhead; the
`noop` row is an empty Python call, without ctypes). Prints the kernel's clocksource too."""
import ctypes, ctypes.util, glob, os, time

def per_call(fn, n=200_000):
    t = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t) / n

src = "/sys/devices/system/clocksource/clocksource0"
for f in ("current_clocksource", "available_clocksource"):
    try:
        print(f"{f}: {open(os.path.join(src, f)).read().strip()}")
    except OSError as e:
        print(f"{f}: {e}")
import torch
lib = glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cu13", "lib", "libcupti.so*"))
cupti = ctypes.CDLL(lib[0])
ts = ctypes.c_uint64()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
class Timespec(ctypes.Structure):
    _fields_ = [("s", ctypes.c_long), ("ns", ctypes.c_long)]
spec = Timespec()
rows = [("noop", lambda: None)]
rows.append(("cuptiGetTimestamp", lambda: cupti.cuptiGetTimestamp(ctypes.byref(ts))))
for name, clk in (("CLOCK_MONOTONIC", 1), ("CLOCK_MONOTONIC_RAW", 4), ("CLOCK_REALTIME", 0)):
    rows.append((f"clock_gettime({name})", lambda c=clk: libc.clock_gettime(c, ctypes.byref(spec))))
for name, fn in rows:
    print(f"{name}: {min(per_call(fn) for _ in range(3)):.0f} ns per call")
