#include "runtime/graph_executor.h"

#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "runtime/amx.h"
#include "runtime/c_runtime_api.h"
#include "runtime/cpu_features.h"
#include "runtime/host_region.h"
#include "runtime/package.h"

namespace kiln::runtime {

namespace {

using json = nlohmann::json;

constexpr int64_t kFormatVersion = 1;

// Reads mod.json's fields, turning every missing or mistyped one into a
// CorruptPackage naming the package, the member and the place in the graph.
class GraphReader {
 public:
  GraphReader(const std::string& package, const std::string& member)
      : package_(package), member_(member) {}

  [[noreturn]] void bad(const std::string& where, const std::string& msg) const {
    throw CorruptPackage(package_, member_ + ": " + where + ": " + msg);
  }

  json parse(const std::string& text) const {
    try {
      json j = json::parse(text);
      if (!j.is_object()) bad("top level", "not a JSON object");
      return j;
    } catch (const json::exception& e) {
      throw CorruptPackage(package_, member_ + ": not valid JSON: " + e.what());
    }
  }

  const json& field(const json& obj, const char* key, const std::string& where) const {
    if (!obj.is_object()) bad(where, "not a JSON object");
    auto it = obj.find(key);
    if (it == obj.end()) bad(where, std::string("missing \"") + key + "\"");
    return *it;
  }
  int64_t integer(const json& obj, const char* key, const std::string& where, int64_t lo = 0,
                  int64_t hi = std::numeric_limits<int64_t>::max()) const {
    const json& v = field(obj, key, where);
    if (!v.is_number_integer())
      bad(where, std::string("\"") + key + "\" is not an integer: " + v.dump());
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi)
      bad(where, std::string("\"") + key + "\" = " + std::to_string(x) + " is out of range [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }
  std::string string(const json& obj, const char* key, const std::string& where) const {
    const json& v = field(obj, key, where);
    if (!v.is_string()) bad(where, std::string("\"") + key + "\" is not a string: " + v.dump());
    return v.get<std::string>();
  }
  const json& array(const json& obj, const char* key, const std::string& where) const {
    const json& v = field(obj, key, where);
    if (!v.is_array()) bad(where, std::string("\"") + key + "\" is not an array");
    return v;
  }
  std::string optional_string(const json& obj, const char* key, const std::string& where) const {
    return obj.contains(key) ? string(obj, key, where) : std::string();
  }

 private:
  const std::string& package_;
  const std::string& member_;
};

std::string at(const char* list, size_t i, const std::string& name = "") {
  std::string s = std::string(list) + "[" + std::to_string(i) + "]";
  if (!name.empty()) s += " ('" + name + "')";
  return s;
}

// The operators whose kernels check indices read at run time
// (KILN_STATUS_INDEX_OUT_OF_RANGE).
bool checks_indices(const std::string& op) {
  return op == "Gather" || op == "GatherElements" || op == "GatherND" || op == "ScatterElements" ||
         op == "Scatter" || op == "ScatterND";
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// A kernel's non-zero status as the error GraphExecutor::run throws.
[[noreturn]] void kernel_failed(const KernelProfile& k, int32_t rc) {
  std::string what = "kernel '" + k.name + "' (" + k.func + ")";
  if (rc == KILN_STATUS_INDEX_OUT_OF_RANGE) {
    const auto& nodes = k.indexing_nodes.empty() ? k.nodes : k.indexing_nodes;
    if (!nodes.empty())
      what += " of node" + std::string(nodes.size() > 1 ? "s " : " ") + join(nodes);
    throw std::runtime_error(
        what +
        ": an index read at run time was out of range (ONNX requires an index into an axis "
        "of size n to lie in [-n, n-1]); this run's outputs are not valid");
  }
  if (rc == KILN_STATUS_OUT_OF_MEMORY)
    throw std::runtime_error(what + " failed: out of memory for its workspace");
  throw std::runtime_error(what + " failed with status " + std::to_string(rc));
}

std::string list_infos(const std::vector<TensorInfo>& infos) {
  std::string s;
  for (size_t i = 0; i < infos.size(); ++i) s += (i ? ", " : "") + infos[i].str();
  return s.empty() ? "(none)" : s;
}

}  // namespace

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t TensorInfo::nbytes() const {
  int64_t n = dtype.bytes();
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::str() const {
  std::string type = sequence ? "sequence<" + dtype.str() + ">" : dtype.str();
  if (optional) type = "optional<" + type + ">";
  return "'" + name + "' " + type + (sequence ? "" : " " + shape_str(shape));
}

struct GraphExecutor::Impl {
  struct Tensor {
    TensorInfo info;
    void* ptr = nullptr;
  };
  struct Kernel {
    KernelProfile meta;
    kiln_kernel_fn fn = nullptr;
    std::vector<void*> args;
  };

  std::string path, target, kiln_version, library_member;
  std::shared_ptr<Module> module;
  std::vector<NDArray> storages;
  std::vector<Tensor> tensors;
  std::vector<int64_t> input_tensors, output_tensors;
  std::vector<bool> input_unread;  // per input: mod.json's "unread" (no step reads its data)
  std::vector<TensorInfo> inputs, outputs;
  std::vector<Kernel> kernels;
  // The run-time shaped part (mod.json's "host"); output i is its value
  // output_values[i] where that is >= 0 (output_tensors[i] is then -1).
  HostRegion host;
  std::vector<int64_t> output_values;
  // Input i is the host region's value input_values[i] where that is >= 0
  // (a sequence or an optional; input_tensors[i] is then -1).
  std::vector<int64_t> input_values;

  explicit Impl(Package pkg);
  void read_tensors(const GraphReader& r, const json& g);
  std::vector<int64_t> read_bindings(const GraphReader& r, const json& g, const char* list,
                                     std::vector<std::string>* names);
  void load_params(const GraphReader& r, const json& g, Package& pkg);
  void read_kernels(const GraphReader& r, const json& g);
  void read_host(const GraphReader& r, const json& g);
  void read_outputs(const GraphReader& r, const json& g);
  void update_dynamic_outputs();
  void check_signature(const GraphReader& r, const std::string& where, const std::string& func,
                       const std::vector<const TensorInfo*>& args) const;
  void check_requirements(const GraphReader& r, const json& g) const;
};

// mod.json's "requires" (packages of kiln 0.1 may lack it): the architecture
// and the CPU features the kernels may use, checked before any kernel runs.
void GraphExecutor::Impl::check_requirements(const GraphReader& r, const json& g) const {
  if (!g.contains("requires")) return;
  const json& req = g["requires"];
  if (!req.is_object()) r.bad("requires", "not an object");
  std::string arch = r.optional_string(req, "arch", "requires");
  if (!arch.empty() && arch != host_arch())
    throw IncompatiblePackage(path, "it is built for " + arch + "; this machine is " + host_arch());
  const json& list = r.array(req, "cpu_features", "requires");
  std::vector<std::string> wanted;
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) r.bad(at("requires.cpu_features", i), "not a string");
    wanted.push_back(list[i].get<std::string>());
  }
  std::vector<std::string> missing = missing_cpu_features(wanted);
  if (missing.empty()) {
    // Code that may use AMX tiles needs Linux's permission first (runtime/amx.h).
    for (const std::string& f : wanted)
      if (f == "amx-tile" || f == "amx-int8" || f == "amx-bf16") {
        std::string why = request_amx_permission();
        if (!why.empty()) throw IncompatiblePackage(path, "its code uses AMX tiles: " + why);
        break;
      }
    return;
  }
  std::string names;
  for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
  throw IncompatiblePackage(path, "it needs CPU features this machine lacks: " + names +
                                      " (built for " + (target.empty() ? "?" : target) +
                                      "); rebuild it with --target for this machine");
}

GraphExecutor::Impl::Impl(Package pkg)
    : path(pkg.path), library_member(pkg.library_member), module(pkg.module) {
  GraphReader r(path, pkg.graph_member);
  json g = r.parse(pkg.graph_json);
  const json& version = r.field(g, "format_version", "top level");
  if (!version.is_number_integer() || version.get<int64_t>() != kFormatVersion)
    r.bad("format_version", version.dump() + " is not supported (this runtime reads " +
                                std::to_string(kFormatVersion) + ")");
  kiln_version = r.optional_string(g, "kiln_version", "top level");
  target = r.optional_string(g, "target", "top level");
  check_requirements(r, g);

  const json& storage_list = r.array(g, "storages", "top level");
  std::vector<int64_t> storage_bytes;
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < storage_list.size(); ++i) {
    storage_bytes.push_back(r.integer(storage_list[i], "bytes", at("storages", i)));
    total_bytes += static_cast<uint64_t>(storage_bytes.back());
  }
  for (int64_t bytes : storage_bytes) {
    try {
      storages.push_back(NDArray::empty({bytes}, DType::u8()));
    } catch (const std::bad_alloc&) {
      // A sound package too large for this machine (or its ulimit), not a corrupt one.
      throw PackageTooLarge(
          path, "the intermediate tensors (" + std::to_string(storage_bytes.size()) + " storages)",
          total_bytes);
    }
    std::memset(storages.back().data(), 0, static_cast<size_t>(bytes));
  }
  read_tensors(r, g);
  std::vector<std::string> names;
  input_tensors = read_bindings(r, g, "inputs", &names);
  for (size_t i = 0; i < input_tensors.size(); ++i) {
    inputs.push_back(tensors[input_tensors[i]].info);
    inputs.back().name = names[i];
    // An input no step reads, only its dtype mattered (older packages lack the field).
    const json& entry = g["inputs"][i];
    input_unread.push_back(entry.contains("unread") && entry["unread"].is_boolean() &&
                           entry["unread"].get<bool>());
  }
  input_values.assign(input_tensors.size(), -1);
  read_host(r, g);
  for (size_t v : host.inputs()) {
    TensorInfo info;
    info.name = host.value_name(v);
    info.dtype = host.value(v).dtype;
    info.dynamic = true;
    info.sequence = host.value(v).is_sequence();
    info.optional = host.optional(v);
    inputs.push_back(info);
    input_tensors.push_back(-1);
    input_values.push_back(static_cast<int64_t>(v));
  }
  read_outputs(r, g);
  load_params(r, g, pkg);
  read_kernels(r, g);
}

void GraphExecutor::Impl::read_host(const GraphReader& r, const json& g) {
  if (!g.contains("host")) return;
  host.load(
      g["host"], tensors.size(),
      [&](size_t i) {
        const Tensor& t = tensors[i];
        return HostRegion::StaticTensor{t.info.dtype, t.info.shape, t.ptr};
      },
      [&](const std::string& where, const std::string& why) { r.bad(where, why); });
}

// Outputs name a static tensor ("tensor") or a value of the host region ("value").
void GraphExecutor::Impl::read_outputs(const GraphReader& r, const json& g) {
  const json& list = r.array(g, "outputs", "top level");
  std::set<std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string name = r.string(list[i], "name", at("outputs", i));
    std::string where = at("outputs", i, name);
    if (!seen.insert(name).second) r.bad(where, "the name appears twice");
    TensorInfo info;
    if (list[i].contains("value")) {
      int64_t v =
          r.integer(list[i], "value", where, 0, static_cast<int64_t>(host.num_values()) - 1);
      output_tensors.push_back(-1);
      output_values.push_back(v);
      info.dtype = host.value(v).dtype;
      info.dynamic = true;
      info.sequence = host.value(v).is_sequence();
      info.optional = host.optional(v);
    } else {
      int64_t t = r.integer(list[i], "tensor", where, 0, static_cast<int64_t>(tensors.size()) - 1);
      output_tensors.push_back(t);
      output_values.push_back(-1);
      info = tensors[t].info;
    }
    info.name = name;
    outputs.push_back(std::move(info));
  }
}

void GraphExecutor::Impl::update_dynamic_outputs() {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (output_values[i] >= 0) outputs[i].shape = host.value(output_values[i]).shape;
}

void GraphExecutor::Impl::read_tensors(const GraphReader& r, const json& g) {
  const json& list = r.array(g, "tensors", "top level");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    std::string where = at("tensors", i);
    Tensor tensor;
    tensor.info.name = r.string(t, "name", where);
    where = at("tensors", i, tensor.info.name);
    std::string dtype = r.string(t, "dtype", where);
    try {
      tensor.info.dtype = DType::parse(dtype);
    } catch (const std::exception&) {
      r.bad(where, "unknown dtype \"" + dtype + "\"");
    }
    if (tensor.info.dtype.lanes != 1) r.bad(where, "vector dtype \"" + dtype + "\"");
    const json& shape = r.array(t, "shape", where);
    int64_t nbytes = tensor.info.dtype.bytes();
    for (const json& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        r.bad(where, "bad dimension " + d.dump() + " in shape " + shape.dump());
      int64_t dim = d.get<int64_t>();
      if (dim != 0 && nbytes > std::numeric_limits<int64_t>::max() / dim)
        r.bad(where, "shape " + shape.dump() + " is too large");
      tensor.info.shape.push_back(dim);
      nbytes *= dim;
    }
    int64_t s = r.integer(t, "storage", where, 0, static_cast<int64_t>(storages.size()) - 1);
    int64_t offset = r.integer(t, "offset", where);
    int64_t capacity = storages[s].nbytes();
    if (offset > capacity || nbytes > capacity - offset)
      r.bad(where, "needs bytes [" + std::to_string(offset) + ", " + std::to_string(offset) +
                       " + " + std::to_string(nbytes) + ") of storage " + std::to_string(s) +
                       ", which has " + std::to_string(capacity) + " bytes");
    tensor.ptr = storages[s].data_as<char>() + offset;
    tensors.push_back(std::move(tensor));
  }
}

std::vector<int64_t> GraphExecutor::Impl::read_bindings(const GraphReader& r, const json& g,
                                                        const char* key,
                                                        std::vector<std::string>* names) {
  const json& list = r.array(g, key, "top level");
  std::vector<int64_t> ids;
  names->clear();
  std::set<std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    std::string name = r.string(list[i], "name", at(key, i));
    std::string where = at(key, i, name);
    if (!seen.insert(name).second) r.bad(where, "the name appears twice");
    ids.push_back(r.integer(list[i], "tensor", where, 0, static_cast<int64_t>(tensors.size()) - 1));
    names->push_back(name);
  }
  return ids;
}

void GraphExecutor::Impl::load_params(const GraphReader& r, const json& g, Package& pkg) {
  std::vector<std::string> names;
  std::vector<int64_t> ids = read_bindings(r, g, "params", &names);
  std::map<std::string, NDArray*> arrays;
  for (auto& a : pkg.params) arrays[a.name] = &a.array;
  for (size_t i = 0; i < ids.size(); ++i) {
    const TensorInfo& want = tensors[ids[i]].info;
    std::string where = pkg.params_member + ": array '" + names[i] + "'";
    auto it = arrays.find(names[i]);
    if (it == arrays.end())
      throw CorruptPackage(path, where,
                           "missing (mod.json lists it as a param of " + want.dtype.str() + " " +
                               shape_str(want.shape) + ")");
    const NDArray& a = *it->second;
    if (a.dtype() != want.dtype || a.shape() != want.shape)
      throw CorruptPackage(path, where,
                           "is " + a.dtype().str() + " " + shape_str(a.shape()) +
                               " but mod.json's tensor '" + want.name + "' is " + want.dtype.str() +
                               " " + shape_str(want.shape));
    std::memcpy(tensors[ids[i]].ptr, a.data(), static_cast<size_t>(a.nbytes()));
    arrays.erase(it);
  }
  if (!arrays.empty())
    throw CorruptPackage(path, pkg.params_member + ": array '" + arrays.begin()->first + "'",
                         "is not a param of the graph");
  pkg.params.clear();  // copied into the storages
}

// The arguments mod.json passes a kernel against the signature compiled
// into the library with it (FUNC_signature, "DTYPE:ELEMENTS;...", see
// codegen::kernel_signature): a kernel handed fewer, other or smaller
// buffers than it was compiled for would read and write past them, so an
// edited mod.json that disagrees is corrupt before anything runs.
void GraphExecutor::Impl::check_signature(const GraphReader& r, const std::string& where,
                                          const std::string& func,
                                          const std::vector<const TensorInfo*>& args) const {
  const char* sig = static_cast<const char*>(module->find_symbol(func + "_signature"));
  if (!sig)
    r.bad(where, library_member + " has no signature for '" + func +
                     "' (a package of an older kiln: build it again)");
  std::vector<std::string> want;
  std::string text = sig;
  for (size_t start = 0; !text.empty();) {
    size_t end = text.find(';', start);
    want.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  std::string passed;
  bool ok = want.size() == args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    int64_t elements = 1;
    for (int64_t d : args[i]->shape) elements *= d;
    std::string got = args[i]->dtype.str() + ":" + std::to_string(elements);
    passed += (i ? ";" : "") + got;
    if (ok && got != want[i] && want[i] != args[i]->dtype.str() + ":?") ok = false;
  }
  if (!ok)
    r.bad(where, "passes " + std::to_string(args.size()) + " arguments (" + passed + ") but " +
                     library_member + "'s " + func + " was compiled for " +
                     std::to_string(want.size()) + " (" + text + ")");
}

void GraphExecutor::Impl::read_kernels(const GraphReader& r, const json& g) {
  const json& list = r.array(g, "kernels", "top level");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& k = list[i];
    Kernel kernel;
    kernel.meta.name = r.string(k, "name", at("kernels", i));
    std::string where = at("kernels", i, kernel.meta.name);
    kernel.meta.func = r.string(k, "func", where);
    kernel.meta.workload = r.optional_string(k, "workload", where);
    if (k.contains("op_types")) {
      for (const json& op : r.array(k, "op_types", where)) {
        if (!op.is_string()) r.bad(where, "op_types holds a non-string " + op.dump());
        kernel.meta.op_types.push_back(op.get<std::string>());
      }
    }
    if (k.contains("nodes")) {
      for (const json& n : r.array(k, "nodes", where)) {
        std::string name = r.string(n, "name", where + ": nodes");
        std::string op = r.string(n, "op_type", where + ": nodes");
        kernel.meta.nodes.push_back("'" + name + "' (" + op + ")");
        if (checks_indices(op)) kernel.meta.indexing_nodes.push_back(kernel.meta.nodes.back());
      }
    }
    if (k.contains("flops")) {
      const json& f = k["flops"];
      if (!f.is_number() || f.get<double>() < 0) r.bad(where, "bad flops " + f.dump());
      kernel.meta.flops = static_cast<int64_t>(f.get<double>());
    }
    std::vector<const TensorInfo*> arg_infos;
    for (const json& a : r.array(k, "args", where)) {
      if (!a.is_number_integer() || a.get<int64_t>() < 0 ||
          a.get<int64_t>() >= static_cast<int64_t>(tensors.size()))
        r.bad(where, "argument " + a.dump() + " is not a tensor index (there are " +
                         std::to_string(tensors.size()) + " tensors)");
      kernel.args.push_back(tensors[a.get<int64_t>()].ptr);
      arg_infos.push_back(&tensors[a.get<int64_t>()].info);
    }
    void* sym = module ? module->find_symbol(kernel.meta.func) : nullptr;
    if (!sym) r.bad(where, library_member + " has no symbol '" + kernel.meta.func + "'");
    check_signature(r, where, kernel.meta.func, arg_infos);
    kernel.fn = reinterpret_cast<kiln_kernel_fn>(sym);
    kernels.push_back(std::move(kernel));
  }
}

GraphExecutor GraphExecutor::load(const std::string& package_path) {
  return GraphExecutor(load_package(package_path));
}

GraphExecutor::GraphExecutor(Package package) : impl_(std::make_unique<Impl>(std::move(package))) {}
GraphExecutor::GraphExecutor(GraphExecutor&&) noexcept = default;
GraphExecutor& GraphExecutor::operator=(GraphExecutor&&) noexcept = default;
GraphExecutor::~GraphExecutor() = default;

const std::vector<TensorInfo>& GraphExecutor::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& GraphExecutor::outputs() const { return impl_->outputs; }

int GraphExecutor::input_index(const std::string& name) const {
  for (size_t i = 0; i < impl_->inputs.size(); ++i)
    if (impl_->inputs[i].name == name) return static_cast<int>(i);
  return -1;
}

void GraphExecutor::set_input(const std::string& name, const NDArray& value) {
  if (!value.defined()) throw std::invalid_argument("input '" + name + "': undefined array");
  set_input(name, value.data(), value.dtype(), value.shape());
}

size_t GraphExecutor::checked_input_index(const std::string& name) const {
  int i = input_index(name);
  if (i < 0)
    throw std::invalid_argument("the model has no input '" + name +
                                "'; its inputs are: " + list_infos(impl_->inputs));
  return static_cast<size_t>(i);
}

void GraphExecutor::set_input(const std::string& name, const void* data, DType dtype,
                              const std::vector<int64_t>& shape) {
  set_input(checked_input_index(name), data, dtype, shape);
}

void GraphExecutor::set_input(size_t index, const void* data, DType dtype,
                              const std::vector<int64_t>& shape) {
  if (index >= impl_->inputs.size())
    throw std::invalid_argument("input index " + std::to_string(index) + " is out of range (" +
                                std::to_string(impl_->inputs.size()) + " inputs)");
  const TensorInfo& want = impl_->inputs[index];
  if (impl_->input_values[index] >= 0) {
    if (want.sequence)
      throw std::invalid_argument("input '" + want.name + "' is a sequence of " + want.dtype.str() +
                                  " tensors; give it one with set_input_sequence");
    if (dtype != want.dtype)
      throw std::invalid_argument("input '" + want.name + "' is " + dtype.str() +
                                  " but the model expects " + want.dtype.str());
    HostValue v;
    v.dtype = dtype, v.shape = shape, v.data = const_cast<void*>(data);
    impl_->host.set_input(static_cast<size_t>(impl_->input_values[index]), v);
    return;
  }
  // An input whose data no step reads (CastLike's `like`): any shape of its dtype.
  if (impl_->input_unread[index] && dtype == want.dtype) return;
  if (dtype != want.dtype || shape != want.shape)
    throw std::invalid_argument("input '" + want.name + "' is " + dtype.str() + " " +
                                shape_str(shape) + " but the model expects " + want.dtype.str() +
                                " " + shape_str(want.shape) +
                                "; its inputs are: " + list_infos(impl_->inputs));
  if (want.nbytes() > 0 && !data)
    throw std::invalid_argument("input '" + want.name + "': null data");
  std::memcpy(impl_->tensors[impl_->input_tensors[index]].ptr, data,
              static_cast<size_t>(want.nbytes()));
}

// A kernel's status is checked as soon as it returns: a failed kernel's
// outputs are not valid, so no later kernel reads them.
void GraphExecutor::run() {
  for (auto& k : impl_->kernels) {
    int32_t rc = k.fn(k.args.data());
    if (rc != 0) kernel_failed(k.meta, rc);
  }
  if (!impl_->host.empty()) {
    impl_->host.run();
    impl_->update_dynamic_outputs();
  }
}

std::vector<KernelProfile> GraphExecutor::run_profiled() {
  std::vector<KernelProfile> profile;
  profile.reserve(impl_->kernels.size());
  for (auto& k : impl_->kernels) {
    auto start = std::chrono::steady_clock::now();
    int32_t rc = k.fn(k.args.data());
    auto end = std::chrono::steady_clock::now();
    if (rc != 0) kernel_failed(k.meta, rc);
    KernelProfile p = k.meta;
    p.calls = 1;
    p.total_ms = std::chrono::duration<double, std::milli>(end - start).count();
    profile.push_back(std::move(p));
  }
  if (!impl_->host.empty()) {
    impl_->host.run([&](const std::string& name, const std::string& op, double ms) {
      KernelProfile p;
      p.name = name;
      p.func = "host";
      p.op_types = {op};
      p.calls = 1;
      p.total_ms = ms;
      profile.push_back(std::move(p));
    });
    impl_->update_dynamic_outputs();
  }
  return profile;
}

NDArray GraphExecutor::output(size_t i) const {
  if (i >= impl_->outputs.size())
    throw std::out_of_range("output index " + std::to_string(i) + " is out of range (" +
                            std::to_string(impl_->outputs.size()) + " outputs)");
  const TensorInfo& info = impl_->outputs[i];
  if (info.sequence)
    throw std::runtime_error("output '" + info.name +
                             "' is a sequence: read it with output_sequence");
  if (output_is_none(i))
    throw std::runtime_error("output '" + info.name + "' is an empty optional");
  if (info.dynamic && !output_data(i))
    throw std::runtime_error("output '" + info.name +
                             "' is shaped at run time and has no value before the first run");
  NDArray a = NDArray::empty(info.shape, info.dtype);
  if (info.nbytes() > 0) std::memcpy(a.data(), output_data(i), static_cast<size_t>(info.nbytes()));
  return a;
}

void GraphExecutor::set_input_sequence(const std::string& name,
                                       const std::vector<NDArray>& elements) {
  const size_t index = checked_input_index(name);
  const TensorInfo& want = impl_->inputs[index];
  if (!want.sequence)
    throw std::invalid_argument(
        "input '" + name + "' is not a sequence; its inputs are: " + list_infos(impl_->inputs));
  HostValue v;
  v.kind = HostValue::Kind::kSequence;
  v.dtype = want.dtype;
  for (size_t j = 0; j < elements.size(); ++j) {
    const NDArray& e = elements[j];
    if (!e.defined() || e.dtype() != want.dtype)
      throw std::invalid_argument("input '" + name + "' element " + std::to_string(j) + " is " +
                                  (e.defined() ? e.dtype().str() : std::string("undefined")) +
                                  "; the sequence holds " + want.dtype.str());
    HostValue t;
    t.dtype = e.dtype(), t.shape = e.shape(), t.data = const_cast<void*>(e.data());
    v.elements.push_back(t);
  }
  impl_->host.set_input(static_cast<size_t>(impl_->input_values[index]), v);
}

void GraphExecutor::set_input_none(const std::string& name) {
  const size_t index = checked_input_index(name);
  const TensorInfo& want = impl_->inputs[index];
  if (!want.optional)
    throw std::invalid_argument("input '" + name +
                                "' is not optional; its inputs are: " + list_infos(impl_->inputs));
  HostValue v;
  v.none = true;
  v.dtype = want.dtype;
  if (want.sequence) v.kind = HostValue::Kind::kSequence;
  impl_->host.set_input(static_cast<size_t>(impl_->input_values[index]), v);
}

std::vector<NDArray> GraphExecutor::output_sequence(size_t i) const {
  if (i >= impl_->outputs.size() || !impl_->outputs[i].sequence)
    throw std::invalid_argument("output " + std::to_string(i) + " is not a sequence");
  if (output_is_none(i))
    throw std::runtime_error("output '" + impl_->outputs[i].name + "' is an empty optional");
  std::vector<NDArray> out;
  for (const HostValue& e : impl_->host.value(impl_->output_values[i]).elements) {
    NDArray a = NDArray::empty(e.shape, e.dtype);
    if (e.nbytes() > 0) std::memcpy(a.data(), e.data, static_cast<size_t>(e.nbytes()));
    out.push_back(std::move(a));
  }
  return out;
}

size_t GraphExecutor::output_sequence_length(size_t i) const {
  if (i >= impl_->outputs.size() || !impl_->outputs[i].sequence)
    throw std::invalid_argument("output " + std::to_string(i) + " is not a sequence");
  if (output_is_none(i))
    throw std::runtime_error("output '" + impl_->outputs[i].name + "' is an empty optional");
  return impl_->host.value(impl_->output_values[i]).elements.size();
}

const void* GraphExecutor::output_element(size_t i, size_t j,
                                          const std::vector<int64_t>** shape) const {
  const size_t n = output_sequence_length(i);
  if (j >= n)
    throw std::out_of_range("element " + std::to_string(j) + " of output '" +
                            impl_->outputs[i].name + "' is out of range (" + std::to_string(n) +
                            " elements)");
  const HostValue& e = impl_->host.value(impl_->output_values[i]).elements[j];
  if (shape) *shape = &e.shape;
  return e.data;
}

bool GraphExecutor::output_is_none(size_t i) const {
  if (i >= impl_->outputs.size())
    throw std::out_of_range("output index " + std::to_string(i) + " is out of range (" +
                            std::to_string(impl_->outputs.size()) + " outputs)");
  return impl_->output_values[i] >= 0 && impl_->host.value(impl_->output_values[i]).none;
}

void* GraphExecutor::input_data(size_t i) {
  if (i >= impl_->inputs.size())
    throw std::out_of_range("input index " + std::to_string(i) + " is out of range (" +
                            std::to_string(impl_->inputs.size()) + " inputs)");
  if (impl_->input_values[i] >= 0)
    throw std::invalid_argument("input '" + impl_->inputs[i].name +
                                "' is a sequence or an optional and has no tensor storage");
  return impl_->tensors[impl_->input_tensors[i]].ptr;
}

const void* GraphExecutor::output_data(size_t i) const {
  if (i >= impl_->outputs.size())
    throw std::out_of_range("output index " + std::to_string(i) + " is out of range (" +
                            std::to_string(impl_->outputs.size()) + " outputs)");
  if (impl_->output_values[i] >= 0) return impl_->host.value(impl_->output_values[i]).data;
  return impl_->tensors[impl_->output_tensors[i]].ptr;
}

const std::string& GraphExecutor::package_path() const { return impl_->path; }
const std::string& GraphExecutor::target() const { return impl_->target; }
const std::string& GraphExecutor::kiln_version() const { return impl_->kiln_version; }
size_t GraphExecutor::num_kernels() const { return impl_->kernels.size(); }

int64_t GraphExecutor::storage_bytes() const {
  int64_t n = 0;
  for (const auto& s : impl_->storages) n += s.nbytes();
  return n;
}

}  // namespace kiln::runtime
