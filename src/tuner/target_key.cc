#include "tuner/target_key.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "codegen/target.h"
#include "support/version.h"

namespace kiln::tuner {
namespace {

// Features that change what codegen emits for kiln's kernels: vector widths,
// FMA, the AVX-512 subsets the vectorizer and intrinsics use, dot-product and
// matrix units. Anything else a host reports (+sgx, +rdrnd, ...) is left out so
// that machines differing only there share records.
const std::vector<std::string>& x86_features() {
  static const std::vector<std::string> f = {
      "amx-bf16", "amx-int8",   "amx-tile", "avx",     "avx2",       "avx512bf16",
      "avx512bw", "avx512cd",   "avx512dq", "avx512f", "avx512fp16", "avx512vbmi",
      "avx512vl", "avx512vnni", "avxvnni",  "f16c",    "fma",        "sse4.2"};
  return f;
}

const std::vector<std::string>& aarch64_features() {
  static const std::vector<std::string> f = {"bf16", "dotprod", "fp-armv8", "fullfp16",
                                             "i8mm", "neon",    "sve",      "sve2"};
  return f;
}

const std::vector<std::string>& arm_features() {
  static const std::vector<std::string> f = {"fp16", "neon", "vfp4"};
  return f;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Only names the target's architecture knows: LLVM warns on stderr about
// feature names foreign to the target.
const std::vector<std::string>* features_for_triple(const std::string& triple) {
  std::string arch = triple.substr(0, triple.find('-'));
  if (arch == "x86_64" || arch == "x86" || arch == "i386" || arch == "i486" || arch == "i586" ||
      arch == "i686" || arch == "amd64")
    return &x86_features();
  if (arch == "aarch64" || arch == "arm64" || arch == "aarch64_be") return &aarch64_features();
  if (starts_with(arch, "arm") || starts_with(arch, "thumb")) return &arm_features();
  return nullptr;
}

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t pos; (pos = s.find(sep, start)) != std::string::npos; start = pos + sep.size())
    out.push_back(s.substr(start, pos - start));
  out.push_back(s.substr(start));
  return out;
}

}  // namespace

std::string TargetKey::key() const {
  return target + "; features=" + features + "; threads=" + std::to_string(threads) +
         "; kiln=" + kiln_version + "; llvm=" + llvm_version +
         (measured.empty() ? "" : "; measured=" + measured);
}

TargetKey TargetKey::in_graph() const {
  TargetKey k = *this;
  k.measured = kInGraph;
  return k;
}

std::string TargetKey::codegen_target() const {
  return features.empty() ? target : target + " -mattr=" + features;
}

TargetKey TargetKey::isolated(bool cold) const {
  TargetKey k = *this;
  k.measured = cold ? kColdWeights : "";
  return k;
}

TargetKey TargetKey::parse(const std::string& key) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("target key \"" + key + "\": " + why);
  };
  std::vector<std::string> parts = split(key, "; ");
  if (parts.size() != 5 && parts.size() != 6)
    throw bad("expected 5 fields separated by \"; \" (6 with measured=)");
  auto field = [&](size_t i, const std::string& name) {
    if (!starts_with(parts[i], name + "="))
      throw bad("field " + std::to_string(i + 1) + " must start with \"" + name + "=\"");
    return parts[i].substr(name.size() + 1);
  };
  TargetKey k;
  k.target = parts[0];
  if (!starts_with(k.target, "llvm")) throw bad("the target must start with \"llvm\"");
  k.features = field(1, "features");
  std::string threads = field(2, "threads");
  size_t used = 0;
  try {
    k.threads = std::stoi(threads, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != threads.size() || k.threads < 1)
    throw bad("threads must be a positive integer, got \"" + threads + "\"");
  k.kiln_version = field(3, "kiln");
  k.llvm_version = field(4, "llvm");
  if (k.kiln_version.empty() || k.llvm_version.empty()) throw bad("empty version");
  if (parts.size() == 6) {
    k.measured = field(5, "measured");
    if (k.measured != kInGraph && k.measured != kLayoutTransform && k.measured != kColdWeights)
      throw bad(std::string("measured must be \"") + kInGraph + "\", \"" + kLayoutTransform +
                "\" or \"" + kColdWeights + "\", got \"" + k.measured + "\"");
  }
  return k;
}

TargetKey TargetKey::for_target(const codegen::Target& target, int threads) {
  if (threads < 1)
    throw std::invalid_argument("target key: thread count must be >= 1, got " +
                                std::to_string(threads));
  codegen::Target bare = target;
  bare.features.clear();
  TargetKey k;
  k.target = bare.str();
  std::vector<std::string> present;
  if (const std::vector<std::string>* names = features_for_triple(target.triple))
    for (const std::string& name : *names)
      if (target.has_feature(name)) present.push_back(name);
  std::sort(present.begin(), present.end());
  for (const std::string& name : present) k.features += (k.features.empty() ? "+" : ",+") + name;
  k.threads = threads;
  k.kiln_version = ::kiln::kiln_version();
  k.llvm_version = codegen::llvm_version_string();
  return k;
}

std::string TargetKey::differences(const TargetKey& o) const {
  std::string out;
  auto note = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) out += (out.empty() ? "" : "; ") + std::string(what) + " " + a + " vs " + b;
  };
  note("target", "\"" + target + "\"", "\"" + o.target + "\"");
  note("features", "\"" + features + "\"", "\"" + o.features + "\"");
  note("threads", std::to_string(threads), std::to_string(o.threads));
  note("kiln", kiln_version, o.kiln_version);
  note("llvm", llvm_version, o.llvm_version);
  note("measured", measured.empty() ? "isolated" : measured,
       o.measured.empty() ? "isolated" : o.measured);
  return out;
}

}  // namespace kiln::tuner
