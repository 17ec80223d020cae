#include "runtime/host_region.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
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

// A subgraph: formal inputs (values), outputs (slots) and its steps, run by
// the region that owns it.
class HostRegion::Body : public HostSubgraph {
 public:
  Body(HostRegion* region, std::vector<size_t> inputs, std::vector<Slot> outputs,
       std::vector<Step> steps)
      : region_(region),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        steps_(std::move(steps)) {
    mark_written(steps_);
  }

  size_t num_inputs() const override { return inputs_.size(); }
  size_t num_outputs() const override { return outputs_.size(); }
  void bind_input(size_t i, const HostValue& v) override {
    HostValue& dst = region_->values_[inputs_.at(i)];
    const HostValue::Kind kind = dst.kind;
    dst = v;
    dst.kind = kind;
  }
  void run() override { region_->run_steps(steps_, {}); }
  const HostValue& output(size_t i) const override { return region_->at(outputs_.at(i)); }
  const HostValue& input(size_t i) const override { return region_->values_[inputs_.at(i)]; }

  void carry(const std::vector<std::pair<size_t, size_t>>& pairs) override {
    // Outputs that are not this body's own fresh values are copied (into a
    // spare buffer per input), all before any hand-over, so that every new
    // input is what this iteration computed.
    std::set<size_t> moved;
    std::vector<std::pair<size_t, size_t>> moves;   // value -> input value
    std::vector<std::pair<size_t, size_t>> copies;  // input value -> spare index
    for (const auto& [out, in] : pairs) {
      const Slot& s = outputs_.at(out);
      const size_t target = inputs_.at(in);
      if (s.is_value && s.index == target) continue;  // passed through unchanged
      if (s.is_value && written_.count(s.index) && moved.insert(s.index).second) {
        moves.push_back({s.index, target});
        continue;
      }
      if (spares_.size() <= in) spares_.resize(in + 1);
      if (spare_values_.size() <= in) spare_values_.resize(in + 1);
      spare_values_[in].kind = region_->values_[target].kind;
      copy_host_value(region_->at(s), &spare_values_[in], &spares_[in]);
      copies.push_back({target, in});
    }
    for (const auto& [v, target] : moves) {
      std::swap(region_->values_[v], region_->values_[target]);
      std::swap(region_->buffers_[v], region_->buffers_[target]);
    }
    for (const auto& [target, in] : copies) {
      std::swap(region_->values_[target], spare_values_[in]);
      std::swap(region_->buffers_[target], spares_[in]);
    }
  }

 private:
  void mark_written(const std::vector<Step>& steps) {
    for (const Step& st : steps)
      for (const Slot& o : st.outputs)
        if (!o.absent) written_.insert(o.index);
  }

  HostRegion* region_;
  std::vector<size_t> inputs_;
  std::vector<Slot> outputs_;
  std::vector<Step> steps_;
  std::set<size_t> written_;  // values the body's own steps write
  std::vector<HostBuffer> spares_;
  std::vector<HostValue> spare_values_;
};

HostRegion::Slot HostRegion::read_slot(const json& r, const std::string& where, size_t num_tensors,
                                       const std::function<StaticTensor(size_t)>& tensor,
                                       const Bad& bad) {
  Slot s;
  if (r.is_null()) return s;
  s.absent = false;
  if (r.is_object() && r.contains("value") && r["value"].is_number_unsigned() &&
      r["value"].get<size_t>() < values_.size()) {
    s.is_value = true, s.index = r["value"].get<size_t>();
  } else if (r.is_object() && r.contains("tensor") && r["tensor"].is_number_unsigned() &&
             r["tensor"].get<size_t>() < num_tensors) {
    size_t t = r["tensor"].get<size_t>();
    if (!static_slot_.count(t)) {
      StaticTensor st = tensor(t);
      static_slot_[t] = statics_.size();
      HostValue v;
      v.dtype = st.dtype, v.shape = st.shape, v.data = st.data;
      statics_.push_back(v);
    }
    s.index = static_slot_[t];
  } else {
    bad(where, "not a value or tensor reference: " + r.dump());
  }
  return s;
}

std::vector<HostRegion::Step> HostRegion::read_steps(
    const json& list, const std::string& at, size_t num_tensors,
    const std::function<StaticTensor(size_t)>& tensor, const Bad& bad) {
  std::vector<Step> steps;
  if (!list.is_array()) bad(at, "\"steps\" is not an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& j = list[i];
    std::string where = at + ".steps[" + std::to_string(i) + "]";
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
    for (const json& r : j["inputs"])
      step.inputs.push_back(read_slot(r, where + " input", num_tensors, tensor, bad));
    for (const json& r : j["outputs"]) {
      Slot s = read_slot(r, where + " output", num_tensors, tensor, bad);
      if (!s.absent && !s.is_value) bad(where, "an output must be a value");
      step.outputs.push_back(s);
    }
    if (j.contains("attrs")) {
      if (!j["attrs"].is_object()) bad(where, "\"attrs\" is not an object");
      for (const auto& [key, a] : j["attrs"].items())
        step.attrs[key] = read_attr(a, where + " attribute '" + key + "'", bad);
    }
    if (j.contains("graphs")) {
      if (!j["graphs"].is_object()) bad(where, "\"graphs\" is not an object");
      for (const auto& [key, gj] : j["graphs"].items()) {
        const std::string gw = where + " subgraph '" + key + "'";
        if (!gj.is_object() || !gj.contains("inputs") || !gj["inputs"].is_array() ||
            !gj.contains("outputs") || !gj["outputs"].is_array() || !gj.contains("steps"))
          bad(gw, "needs \"inputs\", \"outputs\" and \"steps\"");
        std::vector<size_t> ins;
        for (const json& r : gj["inputs"]) {
          Slot s = read_slot(r, gw + " input", num_tensors, tensor, bad);
          if (s.absent || !s.is_value) bad(gw, "an input must be a value");
          ins.push_back(s.index);
        }
        std::vector<Slot> outs;
        for (const json& r : gj["outputs"]) {
          Slot s = read_slot(r, gw + " output", num_tensors, tensor, bad);
          if (s.absent) bad(gw, "an output cannot be absent");
          outs.push_back(s);
        }
        std::vector<Step> body = read_steps(gj["steps"], gw, num_tensors, tensor, bad);
        step.bodies[key] =
            std::make_unique<Body>(this, std::move(ins), std::move(outs), std::move(body));
        step.subgraphs[key] = step.bodies[key].get();
      }
    }
    steps.push_back(std::move(step));
  }
  return steps;
}

// Value types: "float32", "sequence<float32>", "optional<float32>",
// "optional<sequence<float32>>" (graph::HostRegion::dtypes).
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
    std::string type = v["dtype"].get<std::string>();
    bool optional = false;
    auto unwrap = [&](const std::string& prefix) {
      if (type.rfind(prefix + "<", 0) != 0 || type.back() != '>') return false;
      type = type.substr(prefix.size() + 1, type.size() - prefix.size() - 2);
      return true;
    };
    optional = unwrap("optional");
    if (unwrap("sequence")) value.kind = HostValue::Kind::kSequence;
    try {
      value.dtype = DType::parse(type);
    } catch (const std::exception&) {
      bad(where, "unknown dtype " + v["dtype"].dump());
    }
    names_.push_back(v["name"].get<std::string>());
    values_.push_back(value);
    optional_.push_back(optional);
  }
  buffers_.resize(values_.size());
  steps_ = read_steps(host["steps"], "host", num_tensors, tensor, bad);
  if (host.contains("inputs")) {
    if (!host["inputs"].is_array()) bad("host.inputs", "not an array");
    for (const json& r : host["inputs"]) {
      Slot s = read_slot(r, "host.inputs", num_tensors, tensor, bad);
      if (s.absent || !s.is_value) bad("host.inputs", "an input must be a value");
      inputs_.push_back(s.index);
      // Until the caller sets it: an empty optional, an empty sequence.
      values_[s.index].none = optional_[s.index];
    }
  }
}

void HostRegion::set_input(size_t i, const HostValue& v) {
  HostValue& dst = values_.at(i);
  if (v.none && !optional_[i]) throw std::invalid_argument("is not optional");
  if (v.is_sequence() != dst.is_sequence())
    throw std::invalid_argument(dst.is_sequence() ? "is a sequence" : "is not a sequence");
  copy_host_value(v, &dst, &buffers_[i]);
}

const HostValue& HostRegion::at(const Slot& s) const {
  return s.is_value ? values_[s.index] : statics_[s.index];
}

HostRegion::HostRegion() = default;
HostRegion::~HostRegion() = default;

void HostRegion::run(const Each& each) { run_steps(steps_, each); }

void HostRegion::run_steps(std::vector<Step>& steps, const Each& each) {
  std::vector<const HostValue*> inputs;
  std::vector<HostValue*> outputs;
  std::vector<HostBuffer*> buffers;
  for (Step& step : steps) {
    inputs.clear(), outputs.clear(), buffers.clear();
    for (const Slot& s : step.inputs) inputs.push_back(s.absent ? nullptr : &at(s));
    for (const Slot& s : step.outputs) {
      outputs.push_back(s.absent ? nullptr : &values_[s.index]);
      buffers.push_back(s.absent ? nullptr : &buffers_[s.index]);
    }
    auto start = std::chrono::steady_clock::now();
    try {
      HostOpContext ctx(step.op, inputs, outputs, buffers, step.attrs, &step.subgraphs);
      ctx.set_scratch(&step.scratch);
      (*step.fn)(ctx);
    } catch (const std::bad_alloc&) {
      throw std::runtime_error("node '" + step.name + "' (" + step.op +
                               "): out of memory for its outputs");
    } catch (const std::exception& e) {
      // A failure inside a subgraph already names its node.
      const std::string what = e.what();
      if (what.rfind("node '", 0) == 0 && !step.bodies.empty()) throw std::runtime_error(what);
      throw std::runtime_error("node '" + step.name + "' (" + step.op + "): " + what);
    }
    if (each)
      each(step.name, step.op,
           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
               .count());
  }
}

}  // namespace kiln::runtime
