// The scheduler's time slice of the calling thread.
#pragma once

#include <chrono>

namespace silt::base {

// Asks the scheduler (EEVDF, Linux 6.12 and later) for a slice of `slice` for the calling
// thread (the kernel clamps it to 0.1-100 ms). A thread with a short slice gets an earlier
// deadline when it wakes, and so preempts a busy thread at once rather than after the
// running one's slice: for threads that sleep on the device and must run as soon as it
// answers. Returns false where the kernel does not take it (the thread keeps its slice).
bool set_scheduler_slice(std::chrono::nanoseconds slice);

}  // namespace silt::base
