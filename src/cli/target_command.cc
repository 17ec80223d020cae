// kiln target: what kiln knows about a machine, from the host or --target.
#include "cli/target_command.h"

#include <cstdio>
#include <stdexcept>

#include "codegen/target.h"
#include "runtime/c_runtime_api.h"
#include "runtime/cpu_features.h"

namespace kiln::cli {
namespace {

const char* kTargetUsage =
    "usage: kiln target [--target TARGET]\n"
    "  prints the target kiln compiles for (default: this machine): its LLVM target string,\n"
    "  ISA class (the records and shipped logs it uses), vector width and registers, caches,\n"
    "  threads, the CPU features a package built for it requires, and whether this machine\n"
    "  has them.\n";

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s.empty() ? "-" : s;
}

std::string kib(int64_t bytes) {
  return bytes > 0 ? std::to_string(bytes >> 10) + " KiB" : std::string("unknown");
}

}  // namespace

int run_target(const std::vector<std::string>& args) {
  std::string spec;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::fputs(kTargetUsage, stdout);
      return 0;
    }
    if (args[i] == "--target" && i + 1 < args.size())
      spec = args[++i];
    else
      throw std::invalid_argument("unknown option " + args[i] + "\n" + kTargetUsage);
  }
  codegen::Target t = spec.empty() ? codegen::Target::host() : codegen::Target::parse(spec);
  codegen::Target::Isa isa = t.isa();
  codegen::CacheSizes caches = codegen::cache_sizes(t);
  std::vector<std::string> required = t.required_features();
  std::vector<std::string> missing =
      t.arch() == runtime::host_arch() ? runtime::missing_cpu_features(required) : required;
  std::printf("target            %s\n", t.str().c_str());
  std::printf("arch              %s\n", t.arch().c_str());
  std::printf("cpu               %s\n", t.cpu.empty() ? "generic" : t.cpu.c_str());
  std::printf("isa class         %s\n", isa.isa_class.c_str());
  std::printf("vector            %d bits, %d fp32 lanes, %d registers, %d FMA/cycle\n",
              isa.vector_bits, t.float_lanes(), isa.vector_registers, isa.fma_per_cycle);
  if (isa.fma_waits_on_loads)  // ops/conv2d.cc: load_sharing_tile
    std::printf("register tiles    FMAs wait on loads: 1x1 conv tiles share each broadcast\n");
  std::printf("caches per core   L1d %s, L2 %s, L3 %s\n", kib(caches.l1d).c_str(),
              kib(caches.l2).c_str(), kib(caches.l3).c_str());
  std::printf("threads           %d\n", kiln_get_num_threads());
  std::printf("requires          %s\n", join(required).c_str());
  std::printf("runs here         %s\n",
              missing.empty() ? "yes"
                              : (t.arch() != runtime::host_arch()
                                     ? "no (another architecture)"
                                     : ("no, this machine lacks: " + join(missing)).c_str()));
  return 0;
}

}  // namespace kiln::cli
