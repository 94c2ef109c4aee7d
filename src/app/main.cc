// silt: the broker. Until the network server exists it prints the protocol coverage.
#include <cstdio>

#include "protocol/coverage.h"

int main() {
  std::fputs(silt::protocol::coverage_report().c_str(), stdout);
  return 0;
}
