// Mutexes that clang's thread-safety analysis (-Wthread-safety) understands: members say which
// mutex guards them (GUARDED_BY), functions which mutex their caller holds (REQUIRES), and the
// compiler checks every access. Under GCC the annotations are empty and these are plain
// std::mutex and std::shared_mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define SILT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SILT_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) SILT_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY SILT_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) SILT_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) SILT_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) SILT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SILT_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) SILT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SILT_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) SILT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SILT_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) SILT_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) SILT_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) SILT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS SILT_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace silt::base {

class CAPABILITY("mutex") mutex {
 public:
  void lock() ACQUIRE() { m_.lock(); }
  void unlock() RELEASE() { m_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return m_.try_lock(); }
  // For std::condition_variable (through unique_lock below).
  std::mutex& native() { return m_; }

 private:
  std::mutex m_;
};

class CAPABILITY("shared mutex") shared_mutex {
 public:
  void lock() ACQUIRE() { m_.lock(); }
  void unlock() RELEASE() { m_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { m_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { m_.unlock_shared(); }

 private:
  std::shared_mutex m_;
};

// Holds a mutex for its scope.
class SCOPED_CAPABILITY lock_guard {
 public:
  explicit lock_guard(mutex& m) ACQUIRE(m) : m_(m) { m_.lock(); }
  ~lock_guard() RELEASE() { m_.unlock(); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  mutex& m_;
};

// Holds a shared mutex exclusively, or shared, for its scope.
class SCOPED_CAPABILITY exclusive_lock {
 public:
  explicit exclusive_lock(shared_mutex& m) ACQUIRE(m) : m_(m) { m_.lock(); }
  ~exclusive_lock() RELEASE() { m_.unlock(); }
  exclusive_lock(const exclusive_lock&) = delete;
  exclusive_lock& operator=(const exclusive_lock&) = delete;

 private:
  shared_mutex& m_;
};

class SCOPED_CAPABILITY shared_lock {
 public:
  explicit shared_lock(shared_mutex& m) ACQUIRE_SHARED(m) : m_(m) { m_.lock_shared(); }
  ~shared_lock() RELEASE() { m_.unlock_shared(); }
  shared_lock(const shared_lock&) = delete;
  shared_lock& operator=(const shared_lock&) = delete;

 private:
  shared_mutex& m_;
};

// Holds a mutex for its scope and can wait on a condition variable with it.
class SCOPED_CAPABILITY unique_lock {
 public:
  explicit unique_lock(mutex& m) ACQUIRE(m) : lock_(m.native()) {}
  ~unique_lock() RELEASE() = default;
  // Releases the mutex before the end of the scope.
  void unlock() RELEASE() { lock_.unlock(); }
  unique_lock(const unique_lock&) = delete;
  unique_lock& operator=(const unique_lock&) = delete;
  // Waits (the mutex released meanwhile, held again on return) up to `timeout` for `done`.
  template <typename Duration, typename Pred>
  bool wait_for(std::condition_variable& cv, Duration timeout, Pred done) {
    return cv.wait_for(lock_, timeout, done);
  }
  template <typename Pred>
  void wait(std::condition_variable& cv, Pred done) {
    cv.wait(lock_, done);
  }
  // Waits for one notification (or a spurious wake-up).
  void wait(std::condition_variable& cv) { cv.wait(lock_); }
  // The same, but no later than `deadline`.
  template <typename Clock, typename Duration>
  void wait_until(std::condition_variable& cv, std::chrono::time_point<Clock, Duration> deadline) {
    (void)cv.wait_until(lock_, deadline);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace silt::base
