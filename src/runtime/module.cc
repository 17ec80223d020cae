#include "runtime/module.h"

#include <dlfcn.h>

#include <stdexcept>
#include <utility>

namespace kiln::runtime {

Module::~Module() {
  if (handle_) dlclose(handle_);
}

Module::Module(Module&& o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)), path_(std::move(o.path_)) {}

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    if (handle_) dlclose(handle_);
    handle_ = std::exchange(o.handle_, nullptr);
    path_ = std::move(o.path_);
  }
  return *this;
}

Module Module::load(const std::string& path) {
  // dlopen searches the library path for names without '/': a kernel library
  // is always a file, so make relative names explicit.
  std::string p = path.find('/') == std::string::npos ? "./" + path : path;
  dlerror();
  void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    throw std::runtime_error("cannot load kernel library '" + path +
                             "': " + (why ? why : "unknown error"));
  }
  Module m;
  m.handle_ = h;
  m.path_ = path;
  return m;
}

kiln_kernel_fn Module::get_function(const std::string& name) const {
  if (!handle_) throw std::runtime_error("get_function('" + name + "') on an unloaded module");
  dlerror();
  void* sym = dlsym(handle_, name.c_str());
  const char* why = dlerror();
  if (!sym || why)
    throw std::runtime_error("kernel library '" + path_ + "' has no function '" + name + "'");
  return reinterpret_cast<kiln_kernel_fn>(sym);
}

void* Module::find_symbol(const std::string& name) const {
  if (!handle_) return nullptr;
  dlerror();
  void* sym = dlsym(handle_, name.c_str());
  return dlerror() ? nullptr : sym;
}

}  // namespace kiln::runtime
