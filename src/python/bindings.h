// kiln's Python binding (the `kiln._kiln` extension module): a thin layer
// over the same library calls the kiln command makes (src/cli/*_command.cc),
// one file per area. The Python package in python/kiln/ wraps these
// functions into the documented API (README, "Python").
#pragma once

#include <pybind11/pybind11.h>

#include <mutex>

namespace kiln::python {

namespace py = pybind11;

void bind_errors(py::module_& m);   // errors.cc: kiln's exceptions -> kiln.KilnError and kin
void bind_build(py::module_& m);    // build.cc: kiln.build, Package
void bind_tune(py::module_& m);     // tune.cc: kiln.tune
void bind_runtime(py::module_& m);  // runtime.cc: kiln.runtime.load, GraphModule
void bind_records(py::module_& m);  // records.cc: kiln.records

// Held (with the GIL released) by every kiln.build, Package.export and
// kiln.tune: the compiler runs one build or tuning run per process in the
// CLI, and its process-wide state was never meant to serve two at once.
// Loaded GraphModules are independent of it and run concurrently. Recursive: a
// kiln.tune callback may call kiln.build.
std::recursive_mutex& compiler_mutex();

}  // namespace kiln::python
