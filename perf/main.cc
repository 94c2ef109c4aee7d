// silt-perf: the AutoMQ perf-test flags (default), `omb`, `producer` and `consumer` modes.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "automq_cli.h"
#include "kafka_perf.h"
#include "omb.h"

namespace {

constexpr const char* usage = R"(usage:
  silt-perf --bootstrap-server HOST:PORT [AutoMQ perf-test flags...]   (--help for the list)
  silt-perf omb --driver DRIVER.yaml [--bootstrap-server HOST:PORT] WORKLOAD.yaml...
  silt-perf producer --topic T --num-records N --record-size B --throughput R|-1
            [--producer-props K=V...] [--producer.config FILE]
  silt-perf consumer --bootstrap-server HOST:PORT --topic T --messages N [--timeout MS]
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(usage, stderr);
    return 2;
  }
  const std::string mode = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (mode == "omb") return silt::perf::omb_main(rest);
  if (mode == "producer") return silt::perf::producer_perf_main(rest);
  if (mode == "consumer") return silt::perf::consumer_perf_main(rest);
  if (mode == "-h" || mode == "--help" || mode == "help") {
    std::fputs(usage, stdout);
    silt::perf::automq_print_help();
    return 0;
  }
  return silt::perf::automq_main(args);
}
