#include <dlfcn.h>
#include <pybind11/pybind11.h>

#include "python/bindings.h"
#include "runtime/c_runtime_api.h"
#include "support/version.h"

namespace {

// Generated kernels (a package's mod.so) call the runtime's C symbols
// (kiln_parallel_for, ...) without linking libkiln_runtime: the kiln command
// and deployed programs have it in their global scope. Python loads an
// extension module and its libraries RTLD_LOCAL, so promote the runtime
// library, already loaded, to the global scope.
void make_runtime_symbols_global() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&kiln_get_num_threads), &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
}

}  // namespace

std::recursive_mutex& kiln::python::compiler_mutex() {
  static std::recursive_mutex m;
  return m;
}

PYBIND11_MODULE(_kiln, m) {
  make_runtime_symbols_global();
  m.doc() = "kiln's C++ library; use the `kiln` package, not this module";
  m.attr("__version__") = kiln::kiln_version();
  kiln::python::bind_errors(m);
  kiln::python::bind_build(m);
  kiln::python::bind_tune(m);
  kiln::python::bind_runtime(m);
  kiln::python::bind_records(m);
}
