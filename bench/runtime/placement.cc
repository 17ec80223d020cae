// kiln_bench_placement: how fast a package's kernels run with their buffers
// at different places within a 4 KiB page (runtime/buffer.h says why this
// matters and where kiln puts them).
//
// Each kernel of the package (or those whose name contains --kernels) is
// called on its own, as the tuner's worker calls one: every argument a buffer
// of its tensor's size, filled with random floats (zeros for other types),
// warm in the caches. For each offset, every buffer of a page or more starts
// that many bytes into a page (smaller ones on a line). Kernels' workspaces
// are placed by the runtime as in a package. The offsets are timed in
// interleaved rounds; the table shows each offset's best round in ms per call
// and the slowest over the fastest.
//
//   kiln_bench_placement PKG.tar [--offsets 0,16,64,128,2048] [--kernels SUBSTR]
//                        [--rounds 5] [--repeat 50]
//   kiln_bench_placement --smoke   (a one-Relu package; each placement's output
//                                   checked against the reference, no timing)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "driver/build.h"
#include "graph/graph.h"
#include "relu_graph.h"
#include "runtime/c_runtime_api.h"
#include "runtime/ndarray.h"
#include "runtime/package.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr size_t kPageBytes = 4096;

struct Options {
  std::string package;
  std::vector<size_t> offsets = {0, 16, 64, 128, 2048};
  std::string kernels;  // a substring of the kernels' names; empty: all
  int rounds = 5;
  int repeat = 50;
};

// One buffer `offset` bytes into a page (a page or more), or on a line.
class PlacedBuffer {
 public:
  PlacedBuffer(size_t bytes, size_t offset) {
    size_t into = bytes >= kPageBytes ? offset : 0;
    size_t size = (into + std::max<size_t>(bytes, 1) + kPageBytes - 1) / kPageBytes * kPageBytes;
    block_ = static_cast<char*>(std::aligned_alloc(kPageBytes, size));
    if (!block_) throw std::bad_alloc();
    data_ = block_ + into;
  }
  PlacedBuffer(PlacedBuffer&& o) noexcept : block_(o.block_), data_(o.data_) { o.block_ = nullptr; }
  PlacedBuffer(const PlacedBuffer&) = delete;
  ~PlacedBuffer() { std::free(block_); }
  char* data() { return data_; }

 private:
  char* block_;
  char* data_;
};

struct Arg {
  size_t bytes;
  bool is_float;
};

struct Kernel {
  std::string name;
  kiln_kernel_fn fn;
  std::vector<Arg> args;
};

std::vector<Kernel> read_kernels(const kiln::runtime::Package& pkg, const std::string& filter) {
  json g = json::parse(pkg.graph_json);
  std::vector<Kernel> out;
  for (const json& k : g.at("kernels")) {
    std::string name = k.at("name").get<std::string>();
    if (!filter.empty() && name.find(filter) == std::string::npos) continue;
    Kernel kernel{name, pkg.module->get_function(k.at("func").get<std::string>()), {}};
    for (const json& a : k.at("args")) {
      const json& t = g.at("tensors").at(a.get<size_t>());
      auto dtype = kiln::runtime::DType::parse(t.at("dtype").get<std::string>());
      int64_t n = 1;
      for (const json& d : t.at("shape")) n *= d.get<int64_t>();
      kernel.args.push_back({size_t(n * dtype.bytes()), dtype == kiln::runtime::DType::f32()});
    }
    out.push_back(std::move(kernel));
  }
  return out;
}

// The kernel's arguments at `offset`, filled the same way for every offset.
std::vector<PlacedBuffer> place_args(const Kernel& k, size_t offset) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<PlacedBuffer> bufs;
  for (const Arg& a : k.args) {
    bufs.emplace_back(a.bytes, offset);
    if (a.is_float) {
      auto* f = reinterpret_cast<float*>(bufs.back().data());
      for (size_t i = 0; i < a.bytes / 4; ++i) f[i] = uniform(rng);
    } else {
      std::memset(bufs.back().data(), 0, a.bytes);
    }
  }
  return bufs;
}

void call(const Kernel& k, std::vector<void*>& args) {
  if (int32_t rc = k.fn(args.data()); rc != 0)
    throw std::runtime_error(k.name + " returned " + std::to_string(rc));
}

// The pointers gathered once, outside the timed loop.
double time_ms(const Kernel& k, std::vector<PlacedBuffer>& bufs, int repeat) {
  std::vector<void*> args;
  for (auto& b : bufs) args.push_back(b.data());
  call(k, args);  // warm
  auto t0 = Clock::now();
  for (int i = 0; i < repeat; ++i) call(k, args);
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / repeat;
}

void bench(const Options& o) {
  kiln::runtime::Package pkg = kiln::runtime::load_package(o.package);
  std::vector<Kernel> kernels = read_kernels(pkg, o.kernels);
  if (kernels.empty()) throw std::runtime_error("no kernel's name contains '" + o.kernels + "'");
  std::printf("%s: %d threads, best of %d rounds of %d calls, ms per call\n", o.package.c_str(),
              kiln_get_num_threads(), o.rounds, o.repeat);
  std::printf("%-44s", "kernel");
  for (size_t off : o.offsets) std::printf(" %8s", ("+" + std::to_string(off)).c_str());
  std::printf("  slowest/fastest\n");
  for (const Kernel& k : kernels) {
    std::vector<std::vector<PlacedBuffer>> placed;
    for (size_t off : o.offsets) placed.push_back(place_args(k, off));
    std::vector<double> best(o.offsets.size(), INFINITY);
    for (int r = 0; r < o.rounds; ++r)
      for (size_t i = 0; i < o.offsets.size(); ++i)
        best[i] = std::min(best[i], time_ms(k, placed[i], o.repeat));
    std::printf("%-44s", k.name.substr(0, 44).c_str());
    for (double ms : best) std::printf(" %8.4f", ms);
    std::printf("  %.2f\n", *std::max_element(best.begin(), best.end()) /
                                *std::min_element(best.begin(), best.end()));
  }
}

// y = Relu(x) on 4096 floats (16 KiB: page-placed), every offset checked.
int smoke() {
  kiln::graph::Graph g = kiln::bench::relu_graph(4096);
  std::string path = (std::filesystem::temp_directory_path() /
                      ("kiln-bench-placement-" + std::to_string(getpid()) + ".tar"))
                         .string();
  kiln::driver::BuildOptions options;
  options.output_path = path;
  kiln::driver::build_module(g, options);
  kiln::runtime::Package pkg = kiln::runtime::load_package(path);
  std::filesystem::remove(path);
  std::vector<Kernel> kernels = read_kernels(pkg, "");
  int checked = 0;
  for (const Kernel& k : kernels) {
    if (k.args.size() != 2 || k.args[0].bytes != 4096 * 4) continue;
    for (size_t off : {0, 16, 64, 2048}) {
      auto bufs = place_args(k, off);
      if (reinterpret_cast<uintptr_t>(bufs[0].data()) % kPageBytes != off) {
        std::fprintf(stderr, "kiln_bench_placement: input not at +%zu\n", off);
        return 1;
      }
      time_ms(k, bufs, 2);
      auto* x = reinterpret_cast<const float*>(bufs[0].data());
      auto* y = reinterpret_cast<const float*>(bufs[1].data());
      for (int i = 0; i < 4096; ++i)
        if (y[i] != std::max(x[i], 0.0f)) {
          std::fprintf(stderr, "kiln_bench_placement: +%zu: y[%d] = %g for x = %g\n", off, i, y[i],
                       x[i]);
          return 1;
        }
      ++checked;
    }
  }
  if (checked == 0) {
    std::fprintf(stderr, "kiln_bench_placement: the Relu package has no Relu kernel\n");
    return 1;
  }
  std::printf("kiln_bench_placement --smoke: %d placements checked\n", checked);
  return 0;
}

std::vector<size_t> parse_offsets(const std::string& s) {
  std::vector<size_t> v;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    size_t off = std::stoul(item);
    if (off % 4 != 0 || off >= kPageBytes)
      throw std::invalid_argument("--offsets: " + item + " is not a multiple of 4 below 4096");
    v.push_back(off);
  }
  if (v.empty()) throw std::invalid_argument("--offsets: none given");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 2 && std::strcmp(argv[1], "--smoke") == 0) return smoke();
    Options o;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      if (a == "--offsets")
        o.offsets = parse_offsets(value());
      else if (a == "--kernels")
        o.kernels = value();
      else if (a == "--rounds")
        o.rounds = std::max(1, std::stoi(value()));
      else if (a == "--repeat")
        o.repeat = std::max(1, std::stoi(value()));
      else if (a.rfind("--", 0) == 0)
        throw std::invalid_argument("unknown option " + a);
      else
        o.package = a;
    }
    if (o.package.empty()) throw std::invalid_argument("usage: kiln_bench_placement PKG.tar [...]");
    bench(o);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_bench_placement: %s\n", e.what());
    return 1;
  }
}
