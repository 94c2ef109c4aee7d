// The scheduler's time slice, the nice value and the name of the calling thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace silt::base {

// Asks the scheduler (EEVDF, Linux 6.12 and later) for a slice of `slice` for the calling
// thread (the kernel clamps it to 0.1-100 ms). A thread with a short slice gets an earlier
// deadline when it wakes, and so preempts a busy thread at once rather than after the
// running one's slice: for threads that sleep on the device and must run as soon as it
// answers. Returns false where the kernel does not take it (the thread keeps its slice).
bool set_scheduler_slice(std::chrono::nanoseconds slice);

// Sets the nice value of the calling thread (not of the process: Linux keeps one per thread,
// and threads it creates afterwards start with it). A value below the thread's current one
// needs root, CAP_SYS_NICE or a high enough RLIMIT_NICE: returns the error (errno's text)
// where the kernel refuses, and the thread keeps its value.
[[nodiscard]] std::optional<std::string> set_thread_nice(int nice);

// Names the calling thread (`top -H`, `ps -L`, /proc/PID/task/TID/comm, debuggers); the
// kernel keeps 15 bytes, so longer names are cut there.
void set_thread_name(std::string_view name);

}  // namespace silt::base
