// Memory for request frames up to frame_arena::max_frame bytes.
//
// A broker under many partitions receives many small Produce requests (a librdkafka producer
// over 10,000 partitions sends about 17 KB each), and the log cache keeps each one alive until
// its records are evicted, oldest first. From malloc, each such frame grew a thread's heap by
// a system call (`mprotect`) and first-touch page faults. Here a network thread carves its
// frames out of a chunk of its own (a bump pointer, no lock); the chunk is mapped once and
// populated in one call, and it is freed, by whichever thread drops its last frame, into a
// list of chunks that are reused whole (already mapped and touched), or unmapped beyond that
// list. Frames die roughly in the order they were made (the log cache evicts in WAL
// order), so chunks empty in turn; a chunk stays mapped while any of its frames lives, and
// a busy broker keeps up to kept_chunks of them (128 MiB) mapped, as malloc keeps the freed
// memory of its heaps, and release_idle() unmaps those that no frame needed for a while.
//
// Larger frames (and every frame in AddressSanitizer builds, so that it checks their bounds)
// come from operator new.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

namespace silt::net::frame_arena {

inline constexpr size_t chunk_size = size_t{1} << 20;  // aligned to its size
inline constexpr size_t max_frame = chunk_size / 4;
// Empty chunks kept mapped for reuse. The log cache frees frames in bursts, as uploads make
// them evictable: with 32 kept, a 1 KiB producer at 270 MiB/s had half the chunks freed
// unmapped and as many mapped again for the frames that followed; with 128, almost none.
inline constexpr size_t kept_chunks = 128;

// Returns `n` bytes (16-byte aligned), n <= max_frame; throws std::bad_alloc when no chunk
// can be mapped.
[[nodiscard]] void* allocate(size_t n);
// Frees what allocate() returned, from any thread.
void deallocate(void* p) noexcept;
// Whether frames of `n` bytes come from chunks (false: from operator new).
[[nodiscard]] bool serves(size_t n) noexcept;

struct arena_stats {
  uint64_t chunks_mapped = 0;    // chunks mapped so far
  uint64_t chunks_reused = 0;    // chunks taken again from the free list
  uint64_t chunks_unmapped = 0;  // chunks returned to the system
  uint64_t chunks_free = 0;      // chunks on the free list now
};
[[nodiscard]] arena_stats stats();

// Unmaps the free chunks that stayed free since the previous call (the fewest the free list
// held in between), so that what a burst of work mapped goes back once the broker is idle,
// while a steady load keeps what it reuses. Returns how many it unmapped. Call it now and then
// (every few seconds), from any thread.
size_t release_idle() noexcept;

// The chunk a thread is carving is released when the thread ends; this releases it now: an
// idle network thread then holds no partly carved chunk (the chunk goes back with its last
// frame), and a test sees a chunk emptied.
void release_thread_chunk() noexcept;

}  // namespace silt::net::frame_arena

namespace silt::net {

// Leaves new elements uninitialised (a request buffer is filled from the socket at once, so
// zeroing it would cost a memset) and takes small frames from the frame arena.
template <typename T>
struct frame_allocator {
  using value_type = T;
  frame_allocator() noexcept = default;
  template <typename U>
  frame_allocator(const frame_allocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (frame_arena::serves(bytes)) return static_cast<T*>(frame_arena::allocate(bytes));
    return static_cast<T*>(::operator new(bytes));
  }
  void deallocate(T* p, size_t n) noexcept {
    if (frame_arena::serves(n * sizeof(T))) {
      frame_arena::deallocate(p);
    } else {
      ::operator delete(p);
    }
  }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <typename U>
  bool operator==(const frame_allocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace silt::net
