// kiln.runtime: a loaded package (runtime::GraphExecutor) as GraphModule.
//
// Copies: set_input copies a C-contiguous array of the input's dtype once,
// straight from numpy's buffer into the input's storage (the kernels' argument
// pointers are fixed at load, so a caller's buffer is not bound in place);
// python/kiln/runtime.py makes other layouts contiguous first. input_view
// returns that storage as a writable array, to be filled in place: no copy. get_output copies once
// into a new numpy array, or with copy=False returns a read-only view of the storage, valid until
// the next run. The GIL is released while kernels run, so GraphModules run in parallel in Python
// threads; one module's calls are serialized by a mutex.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "python/bindings.h"
#include "runtime/benchmark.h"
#include "runtime/c_runtime_api.h"
#include "runtime/graph_executor.h"
#include "support/stale_temps.h"

namespace kiln::python {
namespace {

class GraphModule {
 public:
  explicit GraphModule(const std::string& path) {
    support::sweep_stale_temps();  // kiln-package-PID-* folders of killed processes
    py::gil_scoped_release unlocked;
    ex_ = std::make_unique<runtime::GraphExecutor>(runtime::GraphExecutor::load(path));
  }

  py::list input_info() const { return infos(ex_->inputs()); }
  py::list output_info() const { return infos(ex_->outputs()); }
  size_t input_index(const std::string& name) const { return ex_->checked_input_index(name); }
  size_t num_inputs() const { return ex_->inputs().size(); }
  size_t num_outputs() const { return ex_->outputs().size(); }

  // `value` must be C-contiguous (runtime.py sees to it); the executor checks
  // the dtype and shape and names the expected inputs when they differ.
  void check_input(size_t index, const py::array& value) const {
    if (index >= ex_->inputs().size())
      throw std::out_of_range("input index " + std::to_string(index) + " is out of range (" +
                              std::to_string(ex_->inputs().size()) + " inputs)");
    if (!(value.flags() & py::array::c_style))
      throw std::invalid_argument("input '" + ex_->inputs()[index].name +
                                  "': the array must be C-contiguous");
  }

  void set_input(size_t index, const py::array& value) {
    check_input(index, value);
    runtime::DType dtype = dtype_of(value, ex_->inputs()[index]);
    std::vector<int64_t> shape(value.shape(), value.shape() + value.ndim());
    std::lock_guard<std::mutex> lock(mu_);
    ex_->set_input(index, value.data(), dtype, shape);
  }

  // A sequence input's elements (C-contiguous arrays of its dtype), copied in.
  void set_input_sequence(size_t index, const std::vector<py::array>& elements) {
    std::vector<runtime::NDArray> arrays;
    const runtime::TensorInfo& info = info_of(index);
    for (const py::array& e : elements) {
      check_input(index, e);
      std::vector<int64_t> shape(e.shape(), e.shape() + e.ndim());
      runtime::NDArray a = runtime::NDArray::empty(shape, dtype_of(e, info));
      if (a.nbytes() > 0) std::memcpy(a.data(), e.data(), static_cast<size_t>(a.nbytes()));
      arrays.push_back(std::move(a));
    }
    std::lock_guard<std::mutex> lock(mu_);
    ex_->set_input_sequence(info.name, arrays);
  }

  void set_input_none(size_t index) {
    const runtime::TensorInfo& info = info_of(index);
    std::lock_guard<std::mutex> lock(mu_);
    ex_->set_input_none(info.name);
  }

  // Input `index`'s storage as a writable array whose base is the module:
  // what the caller writes there is the input, without any copy.
  py::array input_view(size_t index, py::object self) {
    void* data = ex_->input_data(index);  // range-checked: IndexError
    const runtime::TensorInfo& info = ex_->inputs()[index];
    return py::array(numpy_dtype(info), info.shape, {}, data, self);
  }

  void run() {
    py::gil_scoped_release unlocked;
    std::lock_guard<std::mutex> lock(mu_);
    ex_->run();
  }

  // run(name=array, ...) as one serialized call: the inputs set, the run and
  // the copies of every output under one lock, so that threads sharing the
  // module never see each other's inputs or outputs (set_input, run and
  // get_output are each serialized, but a sequence of them is not).
  py::list run_with(const std::vector<std::pair<size_t, py::array>>& inputs) {
    struct Input {
      size_t index;
      const void* data;
      runtime::DType dtype;
      std::vector<int64_t> shape;
    };
    std::vector<Input> in;
    for (const auto& [index, value] : inputs) {
      check_input(index, value);
      in.push_back({index, value.data(), dtype_of(value, ex_->inputs()[index]),
                    std::vector<int64_t>(value.shape(), value.shape() + value.ndim())});
    }
    // Static outputs: allocated with the GIL, filled without it. A run-time
    // shaped output's size is known only after the run: copied out under the
    // lock, into an array made once the GIL is back.
    std::vector<py::array> outs;
    std::vector<void*> dst;
    for (const runtime::TensorInfo& info : ex_->outputs()) {
      outs.emplace_back(numpy_dtype(info), info.dynamic ? std::vector<int64_t>{0} : info.shape);
      dst.push_back(info.dynamic ? nullptr : outs.back().mutable_data());
    }
    std::vector<runtime::NDArray> shaped_at_run(dst.size());
    // Sequence outputs and empty optionals (lists and None in Python).
    std::vector<std::vector<runtime::NDArray>> sequences(dst.size());
    std::vector<bool> none(dst.size(), false);
    {
      py::gil_scoped_release unlocked;  // `inputs` keeps the arrays alive
      std::lock_guard<std::mutex> lock(mu_);
      for (const Input& i : in) ex_->set_input(i.index, i.data, i.dtype, i.shape);
      ex_->run();
      for (size_t k = 0; k < dst.size(); ++k) {
        if (!dst[k]) {
          if (ex_->output_is_none(k))
            none[k] = true;
          else if (ex_->outputs()[k].sequence)
            sequences[k] = ex_->output_sequence(k);
          else
            shaped_at_run[k] = ex_->output(k);
          continue;
        }
        std::memcpy(dst[k], ex_->output_data(k), static_cast<size_t>(ex_->outputs()[k].nbytes()));
      }
    }
    py::list result;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (none[k]) {
        result.append(py::none());
        continue;
      }
      if (ex_->outputs()[k].sequence) {
        result.append(to_list(outs[k].dtype(), sequences[k]));
        continue;
      }
      if (!dst[k]) {
        const runtime::NDArray& a = shaped_at_run[k];
        outs[k] = py::array(outs[k].dtype(), a.shape());
        if (a.nbytes() > 0)
          std::memcpy(outs[k].mutable_data(), a.data(), static_cast<size_t>(a.nbytes()));
      }
      result.append(outs[k]);
    }
    return result;
  }

  py::object get_output(size_t index, bool copy, py::object self) {
    const void* data = ex_->output_data(index);  // range-checked: IndexError
    const runtime::TensorInfo& info = ex_->outputs()[index];
    if (info.dynamic && ex_->output_is_none(index)) return py::none();
    if (info.sequence) {
      std::vector<runtime::NDArray> elements;
      {
        std::lock_guard<std::mutex> lock(mu_);
        elements = ex_->output_sequence(index);
      }
      return to_list(numpy_dtype(info), elements);
    }
    if (info.dynamic && !data)
      throw std::runtime_error("output '" + info.name +
                               "' is shaped at run time and has no value before the first run");
    py::dtype dtype = numpy_dtype(info);
    // A run-time shaped output's buffer may move at the next run: always a copy.
    if (!copy && !info.dynamic) {
      // A view whose base is the module: the storage outlives the array.
      py::array view(dtype, info.shape, {}, data, self);
      view.attr("setflags")(py::arg("write") = false);
      return view;
    }
    py::array out(dtype, info.shape);
    std::lock_guard<std::mutex> lock(mu_);
    std::memcpy(out.mutable_data(), data, static_cast<size_t>(info.nbytes()));
    return out;
  }

  // `kiln run --print-time`'s statistics (runtime/benchmark.h).
  py::dict benchmark(int repeat, int warmup) {
    runtime::TimeSummary t;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard<std::mutex> lock(mu_);
      t = runtime::benchmark(*ex_, repeat, warmup);
    }
    py::dict d;
    d["mean_ms"] = t.mean_ms, d["median_ms"] = t.median_ms, d["max_ms"] = t.max_ms;
    d["min_ms"] = t.min_ms, d["std_ms"] = t.std_ms, d["times_ms"] = t.times_ms;
    return d;
  }

  // `kiln run --profile`'s per-kernel times of one run.
  py::list profile() {
    std::vector<runtime::KernelProfile> p;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard<std::mutex> lock(mu_);
      p = ex_->run_profiled();
    }
    py::list out;
    for (const auto& k : p) {
      py::dict d;
      d["name"] = k.name, d["func"] = k.func, d["op_types"] = k.op_types;
      d["workload"] = k.workload, d["flops"] = k.flops, d["ms"] = k.total_ms;
      out.append(d);
    }
    return out;
  }

  const runtime::GraphExecutor& executor() const { return *ex_; }

 private:
  static py::list infos(const std::vector<runtime::TensorInfo>& v) {
    py::list out;
    for (const auto& t : v)
      out.append(py::make_tuple(t.name, py::tuple(py::cast(t.shape)), t.dtype.str(),
                                t.sequence ? "sequence" : "tensor", t.optional));
    return out;
  }

  static py::list to_list(const py::dtype& dtype, const std::vector<runtime::NDArray>& elements) {
    py::list out;
    for (const runtime::NDArray& a : elements) {
      py::array e(dtype, a.shape());
      if (a.nbytes() > 0) std::memcpy(e.mutable_data(), a.data(), static_cast<size_t>(a.nbytes()));
      out.append(e);
    }
    return out;
  }

  const runtime::TensorInfo& info_of(size_t index) const {
    if (index >= ex_->inputs().size())
      throw std::out_of_range("input index " + std::to_string(index) + " is out of range (" +
                              std::to_string(ex_->inputs().size()) + " inputs)");
    return ex_->inputs()[index];
  }

  static bool is_bf16(const runtime::DType& t) {
    return t.code == runtime::DTypeCode::BFloat && t.lanes == 1;
  }

  // numpy's name for a kiln dtype ("float32", "int64", "bool", ...). numpy
  // has no bfloat16: such a tensor is its bits, uint16 (as ONNX's own test
  // data stores it). Vector types have none.
  static py::dtype numpy_dtype(const runtime::TensorInfo& info) {
    if (is_bf16(info.dtype)) return py::dtype("uint16");
    if (info.dtype.lanes != 1)
      throw std::invalid_argument("tensor '" + info.name + "' is " + info.dtype.str() +
                                  ", which numpy cannot hold");
    return py::dtype(info.dtype.str());
  }

  // The kiln dtype of a numpy array; a dtype kiln lacks (complex, object, a
  // byte order other than the machine's) is named with what the input wants.
  // A bfloat16 input takes uint16 arrays: the bits of its values.
  static runtime::DType dtype_of(const py::array& a, const runtime::TensorInfo& want) {
    std::string name = py::str(a.dtype()).cast<std::string>();
    const bool native = a.dtype().attr("isnative").cast<bool>();
    if (is_bf16(want.dtype)) {
      if (native && name == "uint16") return want.dtype;
      throw std::invalid_argument("input '" + want.name +
                                  "' is bfloat16: pass its bits as a uint16 array, not numpy "
                                  "dtype " +
                                  name);
    }
    try {
      if (native) return runtime::DType::parse(name);
    } catch (const std::invalid_argument&) {
    }
    throw std::invalid_argument("input '" + want.name + "': numpy dtype " + name +
                                " is not one kiln runs; the model expects " + want.str());
  }

  std::unique_ptr<runtime::GraphExecutor> ex_;
  std::mutex mu_;
};

}  // namespace

void bind_runtime(py::module_& m) {
  // The kernels' thread count (KILN_NUM_THREADS, else the cores); it is
  // part of the records' target key.
  m.def("get_num_threads", [] { return kiln_get_num_threads(); });
  m.def(
      "set_num_threads", [](int n) { kiln_set_num_threads(n); }, py::arg("n"));
  py::class_<GraphModule>(m, "GraphModule")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def("input_info", &GraphModule::input_info)
      .def("output_info", &GraphModule::output_info)
      .def("input_index", &GraphModule::input_index)
      .def_property_readonly("num_inputs", &GraphModule::num_inputs)
      .def_property_readonly("num_outputs", &GraphModule::num_outputs)
      .def("set_input", &GraphModule::set_input, py::arg("index"), py::arg("value"))
      .def("set_input_sequence", &GraphModule::set_input_sequence, py::arg("index"),
           py::arg("elements"))
      .def("set_input_none", &GraphModule::set_input_none, py::arg("index"))
      .def("run", &GraphModule::run)
      .def("run_with", &GraphModule::run_with, py::arg("inputs"))
      .def(
          "get_output",
          [](py::object self, int64_t index, bool copy) {
            // A negative index used to fail in pybind's conversion to size_t ("incompatible
            // function arguments"): an IndexError naming the valid range (issue 65 #17).
            GraphModule& m = self.cast<GraphModule&>();
            const int64_t n = static_cast<int64_t>(m.num_outputs());
            if (index < 0 || index >= n)
              throw py::index_error("output index " + std::to_string(index) + " is out of range (" +
                                    std::to_string(n) + " output" + (n == 1 ? "" : "s") +
                                    (n > 0 ? ": valid 0 to " + std::to_string(n - 1) : "") + ")");
            return m.get_output(static_cast<size_t>(index), copy, self);
          },
          py::arg("index"), py::arg("copy") = true)
      .def(
          "input_view",
          [](py::object self, size_t index) {
            return self.cast<GraphModule&>().input_view(index, self);
          },
          py::arg("index"))
      .def("benchmark", &GraphModule::benchmark, py::arg("repeat"), py::arg("warmup"))
      .def("profile", &GraphModule::profile)
      .def_property_readonly("package_path",
                             [](const GraphModule& g) { return g.executor().package_path(); })
      .def_property_readonly("target", [](const GraphModule& g) { return g.executor().target(); })
      .def_property_readonly("kiln_version",
                             [](const GraphModule& g) { return g.executor().kiln_version(); })
      .def_property_readonly("num_kernels",
                             [](const GraphModule& g) { return g.executor().num_kernels(); })
      .def_property_readonly("storage_bytes",
                             [](const GraphModule& g) { return g.executor().storage_bytes(); });
}

}  // namespace kiln::python
