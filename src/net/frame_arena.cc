#include "net/frame_arena.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <vector>

#include <sys/mman.h>

#include "base/mutex.h"

namespace silt::net::frame_arena {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool use_chunks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool use_chunks = false;
#else
constexpr bool use_chunks = true;
#endif
#else
constexpr bool use_chunks = true;
#endif

constexpr size_t alignment = 16;

// At the start of each chunk. `refs`: the frames carved from it and not yet freed, plus one
// while a thread still carves from it.
struct alignas(64) chunk {
  std::atomic<int64_t> refs{0};
};
constexpr size_t header_size = sizeof(chunk);

size_t offset_in_chunk(const void* p) {
  return reinterpret_cast<uintptr_t>(p) & (chunk_size - 1);
}
static_assert(header_size + max_frame <= chunk_size);

class chunk_pool {
 public:
  chunk* take() {
    {
      base::lock_guard lock(mu_);
      if (!free_.empty()) {
        chunk* c = free_.back();
        free_.pop_back();
        low_water_ = std::min(low_water_, free_.size());
        ++reused_;
        return c;
      }
    }
    chunk* c = map();
    base::lock_guard lock(mu_);
    ++mapped_;
    return c;
  }

  void give_back(chunk* c) noexcept {
    {
      base::lock_guard lock(mu_);
      if (free_.size() < kept_chunks) {
        free_.push_back(c);
        return;
      }
      ++unmapped_;
    }
    ::munmap(c, chunk_size);
  }

  size_t release_idle() noexcept {
    std::array<chunk*, kept_chunks> idle{};
    size_t n = 0;
    {
      base::lock_guard lock(mu_);
      // The chunks at the bottom of the list (free_ is used as a stack) stayed untouched.
      n = std::min(low_water_, free_.size());
      std::copy_n(free_.begin(), n, idle.begin());
      free_.erase(free_.begin(), free_.begin() + static_cast<std::ptrdiff_t>(n));
      unmapped_ += n;
      low_water_ = free_.size();
    }
    for (size_t i = 0; i < n; ++i) ::munmap(idle[i], chunk_size);
    return n;
  }

  arena_stats stats() {
    base::lock_guard lock(mu_);
    return {.chunks_mapped = mapped_,
            .chunks_reused = reused_,
            .chunks_unmapped = unmapped_,
            .chunks_free = free_.size()};
  }

 private:
  // A chunk aligned to its size (its frames find their header by masking their address),
  // with its pages populated in one call rather than faulted in one by one as the socket
  // fills them (where the kernel cannot, they are faulted in as before).
  static chunk* map() {
    void* raw =
        ::mmap(nullptr, 2 * chunk_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    auto* bytes = static_cast<uint8_t*>(raw);
    const size_t skip = (chunk_size - offset_in_chunk(raw)) % chunk_size;
    if (skip > 0) ::munmap(bytes, skip);
    ::munmap(bytes + skip + chunk_size, chunk_size - skip);
    void* p = bytes + skip;
    (void)::madvise(p, chunk_size, MADV_POPULATE_WRITE);
    return ::new (p) chunk;
  }

  base::mutex mu_;
  std::vector<chunk*> free_ GUARDED_BY(mu_);
  uint64_t mapped_ GUARDED_BY(mu_) = 0;
  uint64_t reused_ GUARDED_BY(mu_) = 0;
  uint64_t unmapped_ GUARDED_BY(mu_) = 0;
  // The fewest chunks free_ held since the last release_idle().
  size_t low_water_ GUARDED_BY(mu_) = 0;
};

// Never destroyed: frames may be freed by threads that outlive static destruction.
chunk_pool& pool() {
  static auto* p = new chunk_pool;
  return *p;
}

void release(chunk* c) noexcept {
  if (c->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) pool().give_back(c);
}

// The chunk this thread carves from; released when the thread ends.
struct thread_chunk {
  chunk* current = nullptr;
  size_t used = 0;
  thread_chunk() = default;
  thread_chunk(const thread_chunk&) = delete;
  thread_chunk& operator=(const thread_chunk&) = delete;
  ~thread_chunk() { drop(); }
  void drop() noexcept {
    if (current != nullptr) release(current);
    current = nullptr;
    used = 0;
  }
};
thread_local thread_chunk carving;

}  // namespace

bool serves(size_t n) noexcept {
  return use_chunks && n > 0 && n <= max_frame;
}

void* allocate(size_t n) {
  assert(serves(n) && "a frame the arena does not serve");
  const size_t size = (n + alignment - 1) & ~(alignment - 1);
  thread_chunk& t = carving;
  if (t.current == nullptr || t.used + size > chunk_size) {
    chunk* fresh = pool().take();
    fresh->refs.store(1, std::memory_order_relaxed);  // the carving thread's
    t.drop();
    t.current = fresh;
    t.used = header_size;
  }
  t.current->refs.fetch_add(1, std::memory_order_relaxed);
  void* p = reinterpret_cast<uint8_t*>(t.current) + t.used;
  t.used += size;
  return p;
}

void deallocate(void* p) noexcept {
  auto* bytes = static_cast<uint8_t*>(p);
  release(reinterpret_cast<chunk*>(bytes - offset_in_chunk(p)));
}

arena_stats stats() {
  return pool().stats();
}

size_t release_idle() noexcept {
  return pool().release_idle();
}

void release_thread_chunk() noexcept {
  carving.drop();
}

}  // namespace silt::net::frame_arena
