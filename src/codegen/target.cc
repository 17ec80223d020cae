#include "codegen/target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "codegen/llvm_init.h"

namespace kiln::codegen {

namespace detail {

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

}  // namespace detail

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::vector<std::string> parse_features(const std::string& list, const std::string& whole) {
  std::vector<std::string> out;
  for (const std::string& f : split(list, ',')) {
    if (f.size() < 2 || (f[0] != '+' && f[0] != '-'))
      throw std::invalid_argument("target \"" + whole + "\": bad feature \"" + f +
                                  "\" in -mattr (expected +name or -name)");
    out.push_back(f);
  }
  return out;
}

}  // namespace

Target Target::parse(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> tokens;
  for (std::string t; in >> t;) tokens.push_back(t);
  if (tokens.empty() || tokens[0] != "llvm")
    throw std::invalid_argument("target \"" + s + "\": must start with \"llvm\", got \"" +
                                (tokens.empty() ? std::string() : tokens[0]) + "\"");
  if (tokens.size() == 1) return host();
  Target t;
  bool have_cpu = false, have_attr = false;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    auto value = [&](const std::string& key) {
      std::string v = tok.substr(key.size());
      if (v.empty()) throw std::invalid_argument("target \"" + s + "\": empty value in " + tok);
      return v;
    };
    if (starts_with(tok, "-mcpu=")) {
      t.cpu = value("-mcpu="), have_cpu = true;
    } else if (starts_with(tok, "-mattr=")) {
      t.features = parse_features(value("-mattr="), s), have_attr = true;
    } else if (starts_with(tok, "-mtriple=")) {
      t.triple = value("-mtriple=");
    } else if (tok == "-fast-math") {
      t.fast_math = true;
    } else {
      throw std::invalid_argument("target \"" + s + "\": unknown option \"" + tok + "\"");
    }
  }
  // A target that names only a triple/flags keeps the host's machine description
  // only when nothing about the machine was given.
  if (t.triple.empty()) t.triple = llvm::sys::getProcessTriple();
  if (!have_cpu && !have_attr && t.triple == llvm::sys::getProcessTriple()) {
    Target h = host();
    t.cpu = h.cpu;
    t.features = h.features;
  }
  detail::initialize_llvm();
  std::string err;
  if (!llvm::TargetRegistry::lookupTarget(t.triple, err))
    throw std::invalid_argument("target \"" + s + "\": unsupported triple \"" + t.triple +
                                "\": " + err);
  return t;
}

Target Target::host() {
  Target t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  llvm::StringMap<bool> feats;
  if (llvm::sys::getHostCPUFeatures(feats)) {
    for (const auto& kv : feats)
      if (kv.second) t.features.push_back("+" + kv.first().str());
  }
  std::sort(t.features.begin(), t.features.end());
  return t;
}

std::string Target::str() const {
  std::string s = "llvm -mtriple=" + triple;
  if (!cpu.empty()) s += " -mcpu=" + cpu;
  if (!features.empty()) {
    s += " -mattr=";
    for (size_t i = 0; i < features.size(); ++i) s += (i ? "," : "") + features[i];
  }
  if (fast_math) s += " -fast-math";
  return s;
}

bool Target::has_feature(const std::string& name) const {
  // The last explicit mention wins, as in LLVM's own feature strings.
  for (auto it = features.rbegin(); it != features.rend(); ++it)
    if (it->substr(1) == name) return (*it)[0] == '+';
  if (cpu.empty()) return false;
  detail::initialize_llvm();
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!t) return false;
  std::unique_ptr<llvm::MCSubtargetInfo> sti(t->createMCSubtargetInfo(triple, cpu, ""));
  return sti && sti->checkFeatures("+" + name);
}

std::string llvm_version_string() { return LLVM_VERSION_STRING; }

int Target::vector_bits() const {
  if (has_feature("avx512f")) return 512;
  if (has_feature("avx2")) return 256;
  return 128;
}

}  // namespace kiln::codegen
