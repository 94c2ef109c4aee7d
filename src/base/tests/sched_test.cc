#include "base/sched.h"

#include <cerrno>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace silt::base {
namespace {

int thread_nice() {
  errno = 0;
  const int n = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
  EXPECT_EQ(errno, 0);
  return n;
}

// The value is the calling thread's alone; a thread created afterwards starts with it.
TEST(ThreadNice, SetsTheCallingThreadOnly) {
  int other_before = 0;
  int other_after = 0;
  int child = 0;
  std::thread([&] {
    other_before = thread_nice();
    std::thread([&] {
      // Raising the value is allowed to anyone.
      ASSERT_EQ(set_thread_nice(other_before + 3), std::nullopt);
      other_after = thread_nice();
      std::thread([&] { child = thread_nice(); }).join();
    }).join();
  }).join();
  EXPECT_EQ(other_after, other_before + 3);
  EXPECT_EQ(child, other_before + 3);
  EXPECT_EQ(thread_nice(), other_before);  // this thread untouched
}

// In a child process: drops its capabilities and RLIMIT_NICE to an ordinary user's, asks for a
// lower value, and exits with 0 if it was refused with a reason and the value stayed.
[[noreturn]] void lower_without_the_privilege() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  const rlimit no_nice{0, 0};
  if (::syscall(SYS_capset, &header, data) != 0 || ::setrlimit(RLIMIT_NICE, &no_nice) != 0) {
    std::_Exit(3);
  }
  const int before = thread_nice();
  const auto refused = set_thread_nice(before - 1);
  std::_Exit(refused && !refused->empty() && thread_nice() == before ? 0 : 1);
}

// Without CAP_SYS_NICE and with RLIMIT_NICE at 0, a lower value is refused with the kernel's
// reason, and the thread keeps its value.
TEST(ThreadNiceDeathTest, ALowerValueWithoutThePrivilegeIsRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(lower_without_the_privilege(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace silt::base
