#include "base/memory.h"

#include <malloc.h>

namespace silt::base {

void release_free_memory() {
  (void)malloc_trim(0);
}

size_t heap_allocated_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;  // in arenas, and in chunks mapped on their own
}

}  // namespace silt::base
