// kiln's exceptions as Python exceptions with the same messages:
//
//   KilnError (RuntimeError)            anything kiln reports (std::runtime_error, ...)
//     ModelError                        a model kiln cannot import (frontend::ImportError,
//                                       graph::OpError): names the file, node or tensor
//     InvalidInputError (+ ValueError)  a wrong argument: input name, shape or dtype,
//                                       option value (std::invalid_argument)
//     CorruptPackageError               runtime::CorruptPackage
//     IncompatiblePackageError          runtime::IncompatiblePackage (CPU features)
//     RecordDBBusyError                 tuner::RecordDBBusy (retrying may succeed)
// std::out_of_range is IndexError; std::bad_alloc stays MemoryError (pybind11's own).
#include <cstring>
#include <new>
#include <stdexcept>

#include "frontend/onnx_import.h"
#include "graph/op_registry.h"
#include "python/bindings.h"
#include "runtime/package.h"
#include "tuner/records.h"

namespace kiln::python {
namespace {

PyObject* new_error(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  std::string qualified = std::string("kiln.") + name;
  PyObject* e = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!e) throw py::error_already_set();
  m.attr(name) = py::handle(e);  // the module keeps a reference; so does this static
  return e;
}

// Set once at import; the interpreter owns them for its lifetime.
PyObject *g_kiln, *g_model, *g_invalid, *g_corrupt, *g_incompatible, *g_busy;

// kiln's messages quote what they read (a JSON parser's "last read: '...'", a file name), which
// need not be UTF-8: PyErr_SetString would then raise an exception with an empty message.
// Invalid bytes are kept as \xNN escapes.
void set_error(PyObject* type, const char* what) {
  PyObject* msg = PyUnicode_DecodeUTF8(what, static_cast<Py_ssize_t>(std::strlen(what)),
                                       "backslashreplace");
  if (!msg) {
    PyErr_Clear();
    PyErr_SetString(type, "(a message that is not text)");
    return;
  }
  PyErr_SetObject(type, msg);
  Py_DECREF(msg);
}

void translate(std::exception_ptr p) {
  try {
    std::rethrow_exception(p);
  } catch (const py::error_already_set&) {
    throw;  // a Python exception raised inside a callback: keep it as it is
  } catch (const py::builtin_exception&) {
    throw;  // pybind11's own (cast errors, ...): its translator handles them
  } catch (const std::out_of_range& e) {
    set_error(PyExc_IndexError, e.what());
  } catch (const frontend::ImportError& e) {
    set_error(g_model, e.what());
  } catch (const graph::OpError& e) {
    set_error(g_model, e.what());
  } catch (const runtime::CorruptPackage& e) {
    set_error(g_corrupt, e.what());
  } catch (const runtime::IncompatiblePackage& e) {
    set_error(g_incompatible, e.what());
  } catch (const tuner::RecordDBBusy& e) {
    set_error(g_busy, e.what());
  } catch (const std::invalid_argument& e) {
    set_error(g_invalid, e.what());
  } catch (const std::bad_alloc&) {
    throw;  // MemoryError
  } catch (const std::exception& e) {
    set_error(g_kiln, e.what());
  }
}

}  // namespace

void bind_errors(py::module_& m) {
  g_kiln =
      new_error(m, "KilnError", PyExc_RuntimeError, "An error kiln reports; str() is its message.");
  py::handle kiln(g_kiln);
  g_model = new_error(m, "ModelError", g_kiln,
                      "A model kiln cannot import (names the file, node or tensor).");
  py::tuple invalid_bases = py::make_tuple(kiln, py::handle(PyExc_ValueError));
  g_invalid = new_error(m, "InvalidInputError", invalid_bases.ptr(),
                        "A wrong argument: an input's name, shape or dtype, an option's value.");
  g_corrupt = new_error(m, "CorruptPackageError", g_kiln, "A damaged or foreign package file.");
  g_incompatible = new_error(m, "IncompatiblePackageError", g_kiln,
                             "A package this machine cannot run (another CPU or architecture).");
  g_busy = new_error(m, "RecordDBBusyError", g_kiln,
                     "The records database stayed locked by another process; retry.");
  py::register_exception_translator(translate);
}

}  // namespace kiln::python
