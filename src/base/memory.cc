#include "base/memory.h"

#include <malloc.h>

namespace silt::base {

void release_free_memory() {
  (void)malloc_trim(0);
}

}  // namespace silt::base
