// Giving memory the process freed back to the system.
#pragma once

#include <cstddef>

namespace silt::base {

// Returns the memory free in the allocator's arenas to the system (glibc's malloc_trim): after
// a burst of work frees much at once, such as a topic's deletion forgetting the state of its
// partitions, the arenas of the threads that did it would otherwise keep it resident. Scans
// every arena, so it is for rare events, on a thread that may take a few milliseconds.
void release_free_memory();

// Bytes the allocator has handed out and not had back, over all its arenas (glibc's
// mallinfo2): the heap the process uses, without what the arenas keep free for reuse, which
// the resident size counts.
[[nodiscard]] size_t heap_allocated_bytes();

}  // namespace silt::base
