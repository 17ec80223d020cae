// Deploying a kiln package from C++: this program links only kiln_runtime
// (no LLVM, no compiler). It loads a package, fills the inputs from an .npz
// (by input name) or with zeros, runs, and prints each output's shape and
// first values.
//
//   deploy model.tar [input.npz]
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "runtime/graph_executor.h"
#include "runtime/npz.h"

namespace {

// The first n elements of an output as text.
std::string first_values(const kiln::runtime::NDArray& a, int64_t n) {
  using kiln::runtime::DTypeCode;
  std::string s;
  n = std::min(n, a.numel());
  for (int64_t i = 0; i < n; ++i) {
    char buf[64];
    const auto t = a.dtype();
    if (t.code == DTypeCode::Float && t.bits == 32)
      std::snprintf(buf, sizeof(buf), "%g", a.data_as<float>()[i]);
    else if (t.code == DTypeCode::Float && t.bits == 64)
      std::snprintf(buf, sizeof(buf), "%g", a.data_as<double>()[i]);
    else if (t.code == DTypeCode::Int && t.bits == 64)
      std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(a.data_as<int64_t>()[i]));
    else if (t.code == DTypeCode::Int && t.bits == 32)
      std::snprintf(buf, sizeof(buf), "%d", a.data_as<int32_t>()[i]);
    else if (t.bytes() == 1)
      std::snprintf(buf, sizeof(buf), "%d", a.data_as<uint8_t>()[i]);
    else
      std::snprintf(buf, sizeof(buf), "?");
    if (i) s += ' ';
    s += buf;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s MODEL.tar [INPUT.npz]\n", argv[0]);
    return 2;
  }
  try {
    auto ex = kiln::runtime::GraphExecutor::load(argv[1]);
    if (argc == 3) {
      for (const auto& a : kiln::runtime::read_npz(argv[2])) ex.set_input(a.name, a.array);
    } else {
      for (const auto& in : ex.inputs()) {
        auto zeros = kiln::runtime::NDArray::empty(in.shape, in.dtype);
        std::fill_n(zeros.data_as<char>(), zeros.nbytes(), 0);
        ex.set_input(in.name, zeros);
      }
    }
    ex.run();
    for (size_t i = 0; i < ex.outputs().size(); ++i) {
      kiln::runtime::NDArray out = ex.output(i);
      std::printf("output %zu %s: %s %s: %s\n", i, ex.outputs()[i].name.c_str(),
                  out.dtype().str().c_str(), kiln::runtime::shape_str(out.shape()).c_str(),
                  first_values(out, 8).c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deploy: %s\n", e.what());
    return 1;
  }
}
