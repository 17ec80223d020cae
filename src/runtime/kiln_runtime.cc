// The C API over GraphExecutor: exceptions become status codes and a
// per-thread message.
#include "runtime/kiln_runtime.h"

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/graph_executor.h"

struct kiln_executor {
  kiln::runtime::GraphExecutor ex;
  // dtype strings of inputs and outputs, kept for the const char* we hand out.
  std::vector<std::string> input_dtypes, output_dtypes;
};

namespace {

thread_local std::string last_error;

int fail(int status, const std::string& msg) {
  last_error = msg;
  return status;
}

// Runs f, mapping exceptions to status codes.
template <typename F>
int guarded(F&& f) {
  try {
    f();
    return KILN_OK;
  } catch (const kiln::runtime::CorruptPackage& e) {
    return fail(KILN_CORRUPT_PACKAGE, e.what());
  } catch (const std::invalid_argument& e) {
    return fail(KILN_INVALID_ARGUMENT, e.what());
  } catch (const std::out_of_range& e) {
    return fail(KILN_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(KILN_ERROR, "out of memory");
  } catch (const std::exception& e) {
    return fail(KILN_ERROR, e.what());
  } catch (...) {
    return fail(KILN_ERROR, "unknown error");
  }
}

void require(const void* p, const char* what) {
  if (!p) throw std::invalid_argument(std::string(what) + " is NULL");
}

const kiln::runtime::TensorInfo& info_at(const std::vector<kiln::runtime::TensorInfo>& list,
                                         int32_t i, const char* kind) {
  if (i < 0 || static_cast<size_t>(i) >= list.size())
    throw std::out_of_range(std::string(kind) + " index " + std::to_string(i) +
                            " is out of range (" + std::to_string(list.size()) + " " + kind + "s)");
  return list[static_cast<size_t>(i)];
}

void fill_info(const kiln::runtime::TensorInfo& t, const std::string& dtype, const char** name,
               const char** dtype_out, int32_t* ndim, const int64_t** shape) {
  if (name) *name = t.name.c_str();
  if (dtype_out) *dtype_out = dtype.c_str();
  if (ndim) *ndim = static_cast<int32_t>(t.shape.size());
  if (shape) *shape = t.shape.data();
}

// get_output and output_data read tensors; sequences have their own calls.
void require_tensor_output(const kiln_executor* ex, const kiln::runtime::TensorInfo& info,
                           int32_t i) {
  if (info.sequence)
    throw std::invalid_argument("output '" + info.name +
                                "' is a sequence: read it with "
                                "kiln_executor_output_sequence_length and "
                                "kiln_executor_output_element");
  if (ex->ex.output_is_none(static_cast<size_t>(i)))
    throw std::invalid_argument("output '" + info.name + "' is an empty optional");
}

void fill_kind(const kiln::runtime::TensorInfo& t, int32_t* is_sequence, int32_t* is_optional) {
  if (is_sequence) *is_sequence = t.sequence ? 1 : 0;
  if (is_optional) *is_optional = t.optional ? 1 : 0;
}

}  // namespace

extern "C" {

const char* kiln_last_error(void) { return last_error.c_str(); }

int kiln_executor_load(const char* path, kiln_executor** out) {
  return guarded([&] {
    require(path, "path");
    require(out, "out");
    *out = nullptr;
    auto* h = new kiln_executor{kiln::runtime::GraphExecutor::load(path), {}, {}};
    for (const auto& t : h->ex.inputs()) h->input_dtypes.push_back(t.dtype.str());
    for (const auto& t : h->ex.outputs()) h->output_dtypes.push_back(t.dtype.str());
    *out = h;
  });
}

void kiln_executor_free(kiln_executor* ex) { delete ex; }

int kiln_executor_num_inputs(const kiln_executor* ex, int32_t* out) {
  return guarded([&] {
    require(ex, "executor");
    require(out, "out");
    *out = static_cast<int32_t>(ex->ex.inputs().size());
  });
}

int kiln_executor_num_outputs(const kiln_executor* ex, int32_t* out) {
  return guarded([&] {
    require(ex, "executor");
    require(out, "out");
    *out = static_cast<int32_t>(ex->ex.outputs().size());
  });
}

int kiln_executor_input_info(const kiln_executor* ex, int32_t i, const char** name,
                             const char** dtype, int32_t* ndim, const int64_t** shape) {
  return guarded([&] {
    require(ex, "executor");
    fill_info(info_at(ex->ex.inputs(), i, "input"), ex->input_dtypes[static_cast<size_t>(i)], name,
              dtype, ndim, shape);
  });
}

int kiln_executor_output_info(const kiln_executor* ex, int32_t i, const char** name,
                              const char** dtype, int32_t* ndim, const int64_t** shape) {
  return guarded([&] {
    require(ex, "executor");
    fill_info(info_at(ex->ex.outputs(), i, "output"), ex->output_dtypes[static_cast<size_t>(i)],
              name, dtype, ndim, shape);
  });
}

int kiln_executor_set_input(kiln_executor* ex, const char* name, const void* data,
                            const char* dtype, int32_t ndim, const int64_t* shape) {
  return guarded([&] {
    require(ex, "executor");
    require(name, "name");
    require(dtype, "dtype");
    if (ndim < 0) throw std::invalid_argument("ndim is negative");
    if (ndim > 0) require(shape, "shape");
    kiln::runtime::DType t = kiln::runtime::DType::parse(dtype);
    ex->ex.set_input(name, data, t, std::vector<int64_t>(shape, shape + ndim));
  });
}

int kiln_executor_run(kiln_executor* ex) {
  return guarded([&] {
    require(ex, "executor");
    ex->ex.run();
  });
}

int kiln_executor_get_output(const kiln_executor* ex, int32_t i, void* dst, size_t dst_bytes) {
  return guarded([&] {
    require(ex, "executor");
    const auto& info = info_at(ex->ex.outputs(), i, "output");
    require_tensor_output(ex, info, i);
    if (info.dynamic && !ex->ex.output_data(static_cast<size_t>(i)))
      throw std::invalid_argument("output '" + info.name +
                                  "' is shaped at run time and has no value before the first run");
    auto need = static_cast<size_t>(info.nbytes());
    if (dst_bytes < need)
      throw std::invalid_argument("output " + info.str() + " needs " + std::to_string(need) +
                                  " bytes, the buffer has " + std::to_string(dst_bytes));
    if (need > 0) require(dst, "dst");
    std::memcpy(dst, ex->ex.output_data(static_cast<size_t>(i)), need);
  });
}

int kiln_executor_output_data(const kiln_executor* ex, int32_t i, const void** data,
                              size_t* nbytes) {
  return guarded([&] {
    require(ex, "executor");
    require(data, "data");
    const auto& info = info_at(ex->ex.outputs(), i, "output");
    require_tensor_output(ex, info, i);
    *data = ex->ex.output_data(static_cast<size_t>(i));
    if (nbytes) *nbytes = static_cast<size_t>(info.nbytes());
  });
}

}  // extern "C"

extern "C" {

int kiln_executor_input_kind(const kiln_executor* ex, int32_t i, int32_t* is_sequence,
                             int32_t* is_optional) {
  return guarded([&] {
    require(ex, "executor");
    fill_kind(info_at(ex->ex.inputs(), i, "input"), is_sequence, is_optional);
  });
}

int kiln_executor_output_kind(const kiln_executor* ex, int32_t i, int32_t* is_sequence,
                              int32_t* is_optional) {
  return guarded([&] {
    require(ex, "executor");
    fill_kind(info_at(ex->ex.outputs(), i, "output"), is_sequence, is_optional);
  });
}

int kiln_executor_set_input_sequence(kiln_executor* ex, const char* name, int32_t count,
                                     const void* const* data, const int32_t* ndims,
                                     const int64_t* const* shapes) {
  return guarded([&] {
    require(ex, "executor");
    require(name, "name");
    if (count < 0) throw std::invalid_argument("count is negative");
    if (count > 0) require(data, "data"), require(ndims, "ndims"), require(shapes, "shapes");
    const auto& info = ex->ex.inputs()[ex->ex.checked_input_index(name)];
    std::vector<kiln::runtime::NDArray> elements;
    for (int32_t k = 0; k < count; ++k) {
      if (ndims[k] < 0) throw std::invalid_argument("ndims[" + std::to_string(k) + "] is negative");
      if (ndims[k] > 0) require(shapes[k], "shapes[k]");
      std::vector<int64_t> shape(shapes[k], shapes[k] + ndims[k]);
      kiln::runtime::NDArray a = kiln::runtime::NDArray::empty(shape, info.dtype);
      if (a.nbytes() > 0) {
        require(data[k], "data[k]");
        std::memcpy(a.data(), data[k], static_cast<size_t>(a.nbytes()));
      }
      elements.push_back(std::move(a));
    }
    ex->ex.set_input_sequence(name, elements);
  });
}

int kiln_executor_set_input_none(kiln_executor* ex, const char* name) {
  return guarded([&] {
    require(ex, "executor");
    require(name, "name");
    ex->ex.set_input_none(name);
  });
}

int kiln_executor_output_is_none(const kiln_executor* ex, int32_t i, int32_t* none) {
  return guarded([&] {
    require(ex, "executor");
    require(none, "none");
    info_at(ex->ex.outputs(), i, "output");
    *none = ex->ex.output_is_none(static_cast<size_t>(i)) ? 1 : 0;
  });
}

int kiln_executor_output_sequence_length(const kiln_executor* ex, int32_t i, int32_t* length) {
  return guarded([&] {
    require(ex, "executor");
    require(length, "length");
    info_at(ex->ex.outputs(), i, "output");
    *length = static_cast<int32_t>(ex->ex.output_sequence_length(static_cast<size_t>(i)));
  });
}

int kiln_executor_output_element(const kiln_executor* ex, int32_t i, int32_t j, const void** data,
                                 int32_t* ndim, const int64_t** shape, size_t* nbytes) {
  return guarded([&] {
    require(ex, "executor");
    const auto& info = info_at(ex->ex.outputs(), i, "output");
    if (j < 0) throw std::out_of_range("element index " + std::to_string(j) + " is negative");
    const std::vector<int64_t>* s = nullptr;
    const void* p = ex->ex.output_element(static_cast<size_t>(i), static_cast<size_t>(j), &s);
    if (data) *data = p;
    if (ndim) *ndim = static_cast<int32_t>(s->size());
    if (shape) *shape = s->data();
    if (nbytes) {
      int64_t n = info.dtype.bytes();
      for (int64_t d : *s) n *= d;
      *nbytes = static_cast<size_t>(n);
    }
  });
}

}  // extern "C"
