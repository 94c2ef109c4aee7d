#include "base/sched.h"

#include <cerrno>
#include <cstdint>
#include <system_error>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace silt::base {

namespace {

// The kernel's struct sched_attr (include/uapi/linux/sched/types.h); glibc has no wrapper.
struct sched_attr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // for SCHED_OTHER: the requested slice, in nanoseconds
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};

}  // namespace

bool set_scheduler_slice(std::chrono::nanoseconds slice) {
  sched_attr attr{};
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  // The thread's nice value stays: sched_setattr sets it too, so it is read back first.
  errno = 0;
  const int nice_now = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
  if (errno != 0) return false;
  attr.sched_nice = nice_now;
  attr.sched_runtime = static_cast<uint64_t>(slice.count());
  return ::syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

std::optional<std::string> set_thread_nice(int nice) {
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), nice) != 0) {
    return std::error_code(errno, std::system_category()).message();
  }
  return std::nullopt;
}

void set_thread_name(std::string_view name) {
  constexpr size_t kernel_limit = 15;  // TASK_COMM_LEN less the terminating zero
  const std::string cut(name.substr(0, kernel_limit));
  (void)::pthread_setname_np(::pthread_self(), cut.c_str());
}

}  // namespace silt::base
