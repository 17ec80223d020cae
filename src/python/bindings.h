// kiln's Python binding (the `kiln._kiln` extension module): a thin layer
// over the same library calls the kiln command makes (src/cli/*_command.cc),
// one file per area. The Python package in python/kiln/ wraps these
// functions into the documented API (README, "Python").
#pragma once

#include <pybind11/pybind11.h>

namespace kiln::python {

namespace py = pybind11;

void bind_errors(py::module_& m);   // errors.cc: kiln's exceptions -> kiln.KilnError and kin
void bind_build(py::module_& m);    // build.cc: kiln.build, Package
void bind_tune(py::module_& m);     // tune.cc: kiln.tune
void bind_runtime(py::module_& m);  // runtime.cc: kiln.runtime.load, GraphModule
void bind_records(py::module_& m);  // records.cc: kiln.records

}  // namespace kiln::python
