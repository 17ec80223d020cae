#include "driver/host_steps.h"

#include <cstring>
#include <stdexcept>

#include "runtime/host_op.h"

namespace kiln::driver {

using json = nlohmann::json;

std::string host_constant_tensor(const std::string& value) { return "host:" + value; }

void add_host_constants(graph::Graph& g) {
  for (const auto& [name, init] : g.host.constants) {
    g.initializers[host_constant_tensor(name)] = init;
    g.value_info[host_constant_tensor(name)] = init.type;
  }
}

namespace {

// The first element of a TENSOR attribute (ConstantOfShape's value) as a number.
double first_element(const graph::Initializer& t, const std::string& what) {
  if (t.data.empty()) return 0;
  const std::string& d = t.type.dtype;
  auto get = [&](auto v) {
    std::memcpy(&v, t.data.data(), sizeof(v));
    return static_cast<double>(v);
  };
  if (d == "float32") return get(float{});
  if (d == "float64") return get(double{});
  if (d == "int64") return get(int64_t{});
  if (d == "int32") return get(int32_t{});
  if (d == "int16") return get(int16_t{});
  if (d == "int8") return get(int8_t{});
  if (d == "uint8" || d == "bool") return get(uint8_t{});
  if (d == "uint16") return get(uint16_t{});
  if (d == "uint32") return get(uint32_t{});
  if (d == "uint64") return get(uint64_t{});
  throw std::runtime_error(what + ": a " + d + " value is not supported here");
}

json attribute_json(const graph::Attribute& a, const std::string& what) {
  if (auto* i = std::get_if<int64_t>(&a)) return {{"i", *i}};
  if (auto* f = std::get_if<float>(&a)) return {{"f", *f}};
  if (auto* s = std::get_if<std::string>(&a)) return {{"s", *s}};
  if (auto* is = std::get_if<std::vector<int64_t>>(&a)) return {{"ints", *is}};
  if (auto* fs = std::get_if<std::vector<float>>(&a)) return {{"floats", *fs}};
  if (auto* t = std::get_if<graph::Initializer>(&a)) return {{"f", first_element(*t, what)}};
  throw std::runtime_error(what + " has a kind the executor's host operators do not take");
}

}  // namespace

HostDescription describe_host(const graph::Graph& g,
                              const std::function<size_t(const std::string&)>& tensor_index) {
  HostDescription d;
  std::map<std::string, size_t> value_index;
  json values = json::array();
  for (const auto& [name, dtype] : g.host.dtypes) {
    value_index[name] = values.size();
    values.push_back({{"name", name}, {"dtype", dtype}});
  }
  auto ref = [&](const std::string& v) -> json {
    if (v.empty()) return nullptr;
    if (auto it = value_index.find(v); it != value_index.end()) return {{"value", it->second}};
    if (g.host.constants.count(v)) return {{"tensor", tensor_index(host_constant_tensor(v))}};
    return {{"tensor", tensor_index(v)}};
  };
  std::function<json(const std::vector<graph::Node>&)> steps_of =
      [&](const std::vector<graph::Node>& nodes) {
        json steps = json::array();
        for (const graph::Node& n : nodes) {
          const std::string what = "node '" + n.name + "' (" + n.op_type + ")";
          if (!runtime::find_host_op(n.op_type))
            throw std::runtime_error(what + ": the executor has no host operator for it");
          json step = {{"name", n.name}, {"op", n.op_type}};
          step["inputs"] = json::array();
          for (const std::string& in : n.inputs) step["inputs"].push_back(ref(in));
          step["outputs"] = json::array();
          for (const std::string& out : n.outputs) step["outputs"].push_back(ref(out));
          step["attrs"] = json::object();
          for (const auto& [key, a] : n.attrs)
            step["attrs"][key] = attribute_json(a, what + " attribute '" + key + "'");
          if (!n.subgraphs.empty()) {
            step["graphs"] = json::object();
            for (const auto& [key, sub] : n.subgraphs) {
              json gj = {{"inputs", json::array()}, {"outputs", json::array()}};
              for (const std::string& in : sub->inputs) gj["inputs"].push_back(ref(in));
              for (const std::string& out : sub->outputs) gj["outputs"].push_back(ref(out));
              gj["steps"] = steps_of(sub->nodes);
              step["graphs"][key] = std::move(gj);
            }
          }
          steps.push_back(std::move(step));
        }
        return steps;
      };
  json steps = steps_of(g.host.nodes);
  d.host = {{"values", values}, {"steps", steps}};
  if (!g.host.inputs.empty()) {
    d.host["inputs"] = json::array();
    for (const std::string& in : g.host.inputs) d.host["inputs"].push_back(ref(in));
  }
  d.outputs = json::array();
  for (const std::string& out : g.host.outputs) {
    json o = ref(out);
    o["name"] = out;
    d.outputs.push_back(o);
  }
  return d;
}

}  // namespace kiln::driver
