// A compiled kernel library (from codegen::build_shared_library), loaded
// without LLVM. The loading process must link libkiln_runtime.so: the
// library's calls to kiln_parallel_for etc. resolve against it.
#pragma once

#include <string>

#include "runtime/c_runtime_api.h"

namespace kiln::runtime {

class Module {
 public:
  Module() = default;
  ~Module();
  Module(Module&& o) noexcept;
  Module& operator=(Module&& o) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // dlopen(path, RTLD_NOW | RTLD_LOCAL); throws std::runtime_error naming the
  // path and dlerror()'s reason.
  static Module load(const std::string& path);

  // The kernel `name`; throws std::runtime_error naming the symbol and path.
  kiln_kernel_fn get_function(const std::string& name) const;
  // The address of symbol `name` (function or data), or nullptr if absent.
  void* find_symbol(const std::string& name) const;
  const std::string& path() const { return path_; }
  bool loaded() const { return handle_ != nullptr; }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace kiln::runtime
