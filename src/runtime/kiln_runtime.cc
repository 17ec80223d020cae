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
    *data = ex->ex.output_data(static_cast<size_t>(i));
    if (nbytes) *nbytes = static_cast<size_t>(info.nbytes());
  });
}

}  // extern "C"
