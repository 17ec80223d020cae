#include "runtime/host_region.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace kiln::runtime {

using json = nlohmann::json;

namespace {

HostAttr read_attr(const json& a, const std::string& where, const HostRegion::Bad& bad) {
  HostAttr attr;
  if (!a.is_object() || a.size() != 1) bad(where, "not a one-key object: " + a.dump());
  const std::string kind = a.begin().key();
  const json& v = a.begin().value();
  auto numbers = [&](auto* out) {
    if (!v.is_array()) bad(where, "not an array: " + v.dump());
    for (const json& x : v) {
      if (!x.is_number()) bad(where, "holds a non-number " + x.dump());
      out->push_back(x.get<typename std::remove_pointer_t<decltype(out)>::value_type>());
    }
  };
  if (kind == "i" && v.is_number_integer()) {
    attr.kind = HostAttr::Kind::kInt, attr.i = v.get<int64_t>();
    attr.f = static_cast<double>(attr.i);
  } else if (kind == "f" && v.is_number()) {
    attr.kind = HostAttr::Kind::kFloat, attr.f = v.get<double>();
  } else if (kind == "s" && v.is_string()) {
    attr.kind = HostAttr::Kind::kString, attr.s = v.get<std::string>();
  } else if (kind == "ints") {
    attr.kind = HostAttr::Kind::kInts;
    numbers(&attr.ints);
  } else if (kind == "floats") {
    attr.kind = HostAttr::Kind::kFloats;
    numbers(&attr.floats);
  } else {
    bad(where, "unknown attribute " + a.dump());
  }
  return attr;
}

}  // namespace

void HostRegion::load(const json& host, size_t num_tensors,
                      const std::function<StaticTensor(size_t)>& tensor, const Bad& bad) {
  if (!host.is_object()) bad("host", "not an object");
  if (!host.contains("values") || !host["values"].is_array()) bad("host", "no \"values\" array");
  if (!host.contains("steps") || !host["steps"].is_array()) bad("host", "no \"steps\" array");
  for (size_t i = 0; i < host["values"].size(); ++i) {
    const json& v = host["values"][i];
    std::string where = "host.values[" + std::to_string(i) + "]";
    if (!v.is_object() || !v.contains("name") || !v["name"].is_string() || !v.contains("dtype") ||
        !v["dtype"].is_string())
      bad(where, "needs a \"name\" and a \"dtype\"");
    HostValue value;
    try {
      value.dtype = DType::parse(v["dtype"].get<std::string>());
    } catch (const std::exception&) {
      bad(where, "unknown dtype " + v["dtype"].dump());
    }
    names_.push_back(v["name"].get<std::string>());
    values_.push_back(value);
  }
  buffers_.resize(values_.size());
  std::map<size_t, size_t> static_slot;  // tensor index -> statics_ index
  auto slot = [&](const json& r, const std::string& where) {
    Slot s;
    if (r.is_null()) return s;
    s.absent = false;
    if (r.is_object() && r.contains("value") && r["value"].is_number_unsigned() &&
        r["value"].get<size_t>() < values_.size()) {
      s.is_value = true, s.index = r["value"].get<size_t>();
    } else if (r.is_object() && r.contains("tensor") && r["tensor"].is_number_unsigned() &&
               r["tensor"].get<size_t>() < num_tensors) {
      size_t t = r["tensor"].get<size_t>();
      if (!static_slot.count(t)) {
        StaticTensor st = tensor(t);
        static_slot[t] = statics_.size();
        statics_.push_back({st.dtype, st.shape, st.data});
      }
      s.index = static_slot[t];
    } else {
      bad(where, "not a value or tensor reference: " + r.dump());
    }
    return s;
  };
  for (size_t i = 0; i < host["steps"].size(); ++i) {
    const json& j = host["steps"][i];
    std::string where = "host.steps[" + std::to_string(i) + "]";
    if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("op") ||
        !j["op"].is_string())
      bad(where, "needs a \"name\" and an \"op\"");
    Step step;
    step.name = j["name"].get<std::string>();
    step.op = j["op"].get<std::string>();
    where += " ('" + step.name + "')";
    step.fn = find_host_op(step.op);
    if (!step.fn) bad(where, "this runtime has no host operator '" + step.op + "'");
    for (const char* key : {"inputs", "outputs"})
      if (!j.contains(key) || !j[key].is_array()) bad(where, std::string("no \"") + key + "\"");
    for (const json& r : j["inputs"]) step.inputs.push_back(slot(r, where + " input"));
    for (const json& r : j["outputs"]) {
      Slot s = slot(r, where + " output");
      if (!s.absent && !s.is_value) bad(where, "an output must be a value");
      step.outputs.push_back(s);
    }
    if (j.contains("attrs")) {
      if (!j["attrs"].is_object()) bad(where, "\"attrs\" is not an object");
      for (const auto& [key, a] : j["attrs"].items())
        step.attrs[key] = read_attr(a, where + " attribute '" + key + "'", bad);
    }
    steps_.push_back(std::move(step));
  }
}

void HostRegion::run(
    const std::function<void(const std::string&, const std::string&, double)>& each) {
  std::vector<const HostValue*> inputs;
  std::vector<HostValue*> outputs;
  std::vector<HostBuffer*> buffers;
  for (Step& step : steps_) {
    inputs.clear(), outputs.clear(), buffers.clear();
    for (const Slot& s : step.inputs)
      inputs.push_back(s.absent ? nullptr : s.is_value ? &values_[s.index] : &statics_[s.index]);
    for (const Slot& s : step.outputs) {
      outputs.push_back(s.absent ? nullptr : &values_[s.index]);
      buffers.push_back(s.absent ? nullptr : &buffers_[s.index]);
    }
    auto start = std::chrono::steady_clock::now();
    try {
      HostOpContext ctx(step.op, inputs, outputs, buffers, step.attrs);
      (*step.fn)(ctx);
    } catch (const std::bad_alloc&) {
      throw std::runtime_error("node '" + step.name + "' (" + step.op +
                               "): out of memory for its outputs");
    } catch (const std::exception& e) {
      throw std::runtime_error("node '" + step.name + "' (" + step.op + "): " + e.what());
    }
    if (each)
      each(step.name, step.op,
           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count());
  }
}

}  // namespace kiln::runtime
