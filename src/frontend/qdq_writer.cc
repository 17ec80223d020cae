// QuantPlan -> QDQ ONNX model (qdq_writer.h).
#include "frontend/qdq_writer.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "frontend/onnx_import.h"
#include "frontend/onnx_proto_io.h"

namespace kiln::frontend {
namespace {

// Per-channel DequantizeLinear (its `axis`) arrived in opset 13.
constexpr int64_t kMinQdqOpset = 13;

class Names {
 public:
  explicit Names(const onnx::GraphProto& g) {
    for (const auto& t : g.initializer()) used_.insert(t.name());
    for (const auto& v : g.input()) used_.insert(v.name());
    for (const auto& n : g.node()) {
      for (const auto& s : n.input()) used_.insert(s);
      for (const auto& s : n.output()) used_.insert(s);
      used_.insert(n.name());
    }
  }
  // `base`, or base_2, base_3, ... when the model already has that name.
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int i = 2; used_.count(name); ++i) name = base + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
};

template <typename T>
onnx::TensorProto make_tensor(const std::string& name, int elem_type,
                              const std::vector<int64_t>& shape, const std::vector<T>& values) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(elem_type);
  for (int64_t d : shape) t.add_dims(d);
  // Little-endian raw data, as every ONNX writer stores it on x86 and Arm.
  t.set_raw_data(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
  return t;
}

onnx::NodeProto make_node(const std::string& op, const std::string& name,
                          const std::vector<std::string>& inputs, const std::string& output,
                          std::optional<int64_t> axis = std::nullopt) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : inputs) n.add_input(i);
  n.add_output(output);
  if (axis) {
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(*axis);
  }
  return n;
}

}  // namespace

std::string qdq_model_bytes(const std::string& model_file, const QuantPlan& plan,
                            const std::string& source) {
  onnx::ModelProto model = read_onnx_proto(model_file);
  const std::string& model_path = source.empty() ? model_file : source;
  const int64_t opset = onnx_default_opset(model);
  const bool per_channel = std::any_of(plan.nodes.begin(), plan.nodes.end(),
                                       [](const NodeQuant& n) { return n.weight.has_value(); });
  if (per_channel && opset < kMinQdqOpset)
    throw ImportError(model_path + ": the model imports opset " + std::to_string(opset) +
                      "; per-channel weight quantization needs opset " +
                      std::to_string(kMinQdqOpset) +
                      " or later (DequantizeLinear's axis). Export the model at opset >= 13.");
  onnx::GraphProto* g = model.mutable_graph();
  Names names(*g);

  std::map<size_t, const NodeQuant*> by_index;
  // The node whose output 0 gets the Q -> DQ pair: the quantized node, or
  // the bias Add of a MatMul quantized with it.
  std::map<size_t, const NodeQuant*> output_at;
  std::set<std::string> quantized_outputs;
  for (const NodeQuant& nq : plan.nodes) {
    const size_t out_node = nq.bias_add.value_or(nq.index);
    if (std::max(nq.index, out_node) >= static_cast<size_t>(g->node_size()))
      throw ImportError(model_path + ": quantization plan names node " + nq.label + " at index " +
                        std::to_string(std::max(nq.index, out_node)) + ", past the graph's end");
    if (nq.bias_add) {
      const onnx::NodeProto& mm = g->node(static_cast<int>(nq.index));
      const onnx::NodeProto& add = g->node(static_cast<int>(*nq.bias_add));
      if (add.op_type() != "Add" || mm.output_size() < 1 || add.input_size() != 2 ||
          (add.input(0) != mm.output(0) && add.input(1) != mm.output(0)))
        throw ImportError(model_path + ": node " + nq.label +
                          ": the plan's bias Add does not read its output");
    }
    by_index[nq.index] = &nq;
    output_at[out_node] = &nq;
    quantized_outputs.insert(nq.output);
  }
  auto act = [&](const std::string& tensor, const std::string& node) -> const ActivationQuant& {
    auto it = plan.activations.find(tensor);
    if (it == plan.activations.end())
      throw ImportError(model_path + ": node " + node + ": tensor '" + tensor +
                        "' has no calibrated range in the quantization plan");
    return it->second;
  };

  std::vector<onnx::NodeProto> head;  // weight and bias DequantizeLinear nodes
  std::vector<onnx::TensorProto> new_inits;
  std::map<std::string, std::string> weight_dq;  // float weight -> its DQ output
  // Q -> DQ pair for an activation; returns the DQ output's name.
  std::map<std::string, std::string> act_dq;
  auto qdq_pair = [&](const std::string& tensor, const std::string& dq_output,
                      const std::string& q_input, const std::string& node,
                      std::vector<onnx::NodeProto>* out) {
    const ActivationQuant& a = act(tensor, node);
    const std::string scale = names.fresh(tensor + "_scale");
    const std::string zp = names.fresh(tensor + "_zero_point");
    const std::string q = names.fresh(tensor + "_quantized");
    new_inits.push_back(
        make_tensor(scale, onnx::TensorProto::FLOAT, {}, std::vector<float>{a.scale}));
    new_inits.push_back(
        make_tensor(zp, onnx::TensorProto::UINT8, {}, std::vector<uint8_t>{a.zero_point}));
    out->push_back(make_node("QuantizeLinear", names.fresh(tensor + "_QuantizeLinear"),
                             {q_input, scale, zp}, q));
    out->push_back(make_node("DequantizeLinear", names.fresh(tensor + "_DequantizeLinear"),
                             {q, scale, zp}, dq_output));
  };

  std::vector<onnx::NodeProto> body;
  // The output: the node writes Y_prequant; Q -> DQ gives Y back.
  auto quantize_output = [&](onnx::NodeProto& n, const NodeQuant& nq) {
    if (n.output_size() < 1 || n.output(0) != nq.output)
      throw ImportError(model_path + ": node " + nq.label +
                        " does not match the quantization plan (its output differs)");
    const std::string pre = names.fresh(nq.output + "_prequant");
    n.set_output(0, pre);
    body.push_back(std::move(n));
    qdq_pair(nq.output, nq.output, pre, nq.label, &body);
  };

  for (int i = 0; i < g->node_size(); ++i) {
    onnx::NodeProto n = g->node(i);
    auto found = by_index.find(static_cast<size_t>(i));
    if (found == by_index.end()) {
      auto out = output_at.find(static_cast<size_t>(i));
      if (out == output_at.end())
        body.push_back(std::move(n));
      else
        quantize_output(n, *out->second);  // a MatMul's bias Add
      continue;
    }
    const NodeQuant& nq = *found->second;
    if (n.output_size() < 1 || (nq.weight && n.input_size() < 2))
      throw ImportError(model_path + ": node " + nq.label +
                        " does not match the quantization plan (inputs or output differ)");
    // Activation inputs: a quantized node's output is already its own DQ
    // output (renamed below); anything else gets a pair before this node.
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string in = n.input(k);
      if (std::find(nq.activations.begin(), nq.activations.end(), in) == nq.activations.end())
        continue;
      if (quantized_outputs.count(in)) continue;
      auto it = act_dq.find(in);
      if (it == act_dq.end()) {
        const std::string dq = names.fresh(in + "_dequantized");
        qdq_pair(in, dq, in, nq.label, &body);
        it = act_dq.emplace(in, dq).first;
      }
      n.set_input(k, it->second);
    }
    // The weight.
    if (nq.weight) {
      const WeightQuant& w = *nq.weight;
      if (n.input(1) != w.tensor)
        throw ImportError(model_path + ": node " + nq.label + ": input 1 is '" + n.input(1) +
                          "', the plan quantizes '" + w.tensor + "'");
      auto wit = weight_dq.find(w.tensor);
      if (wit == weight_dq.end()) {
        const std::string q = names.fresh(w.tensor + "_quantized");
        const std::string scale = names.fresh(w.tensor + "_scale");
        const std::string zp = names.fresh(w.tensor + "_zero_point");
        const std::string dq = names.fresh(w.tensor + "_dequantized");
        const int64_t channels = static_cast<int64_t>(w.scales.size());
        new_inits.push_back(make_tensor(q, onnx::TensorProto::INT8, w.shape, w.data));
        new_inits.push_back(make_tensor(scale, onnx::TensorProto::FLOAT, {channels}, w.scales));
        new_inits.push_back(make_tensor(zp, onnx::TensorProto::INT8, {channels},
                                        std::vector<int8_t>(w.scales.size(), 0)));
        head.push_back(make_node("DequantizeLinear", names.fresh(w.tensor + "_DequantizeLinear"),
                                 {q, scale, zp}, dq, w.axis));
        wit = weight_dq.emplace(w.tensor, dq).first;
      }
      n.set_input(1, wit->second);
    }
    // The bias: one int32 tensor per node (its scale depends on the node's input scale).
    if (nq.bias) {
      const BiasQuant& b = *nq.bias;
      if (n.input_size() < 3 || n.input(2) != b.tensor)
        throw ImportError(model_path + ": node " + nq.label + ": the plan's bias '" + b.tensor +
                          "' is not its input 2");
      const std::string q = names.fresh(b.tensor + "_quantized");
      const std::string scale = names.fresh(b.tensor + "_scale");
      const std::string zp = names.fresh(b.tensor + "_zero_point");
      const std::string dq = names.fresh(b.tensor + "_dequantized");
      const int64_t channels = static_cast<int64_t>(b.scales.size());
      new_inits.push_back(make_tensor(q, onnx::TensorProto::INT32, {channels}, b.data));
      new_inits.push_back(make_tensor(scale, onnx::TensorProto::FLOAT, {channels}, b.scales));
      new_inits.push_back(make_tensor(zp, onnx::TensorProto::INT32, {channels},
                                      std::vector<int32_t>(b.scales.size(), 0)));
      head.push_back(make_node("DequantizeLinear", names.fresh(b.tensor + "_DequantizeLinear"),
                               {q, scale, zp}, dq, 0));
      n.set_input(2, dq);
    }
    if (nq.bias_add)
      body.push_back(std::move(n));  // its bias Add writes the quantized output
    else
      quantize_output(n, nq);
  }

  g->clear_node();
  for (auto& n : head) *g->add_node() = std::move(n);
  for (auto& n : body) *g->add_node() = std::move(n);

  // Drop float initializers (and their old-IR graph-input entries) that no
  // node reads any more.
  std::set<std::string> read;
  for (const auto& n : g->node())
    for (const auto& s : n.input()) read.insert(s);
  for (const auto& o : g->output()) read.insert(o.name());
  std::set<std::string> dropped;
  auto* inits = g->mutable_initializer();
  for (int i = inits->size() - 1; i >= 0; --i)
    if (!read.count(inits->Get(i).name())) {
      dropped.insert(inits->Get(i).name());
      inits->DeleteSubrange(i, 1);
    }
  auto* inputs = g->mutable_input();
  for (int i = inputs->size() - 1; i >= 0; --i)
    if (dropped.count(inputs->Get(i).name())) inputs->DeleteSubrange(i, 1);
  for (auto& t : new_inits) *g->add_initializer() = std::move(t);

  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw ImportError(model_path + ": the QDQ model fails the ONNX checker: " + e.what());
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    throw ImportError(model_path + ": the QDQ model could not be serialized (over 2 GiB?)");
  return bytes;
}

void write_qdq_model(const std::string& model_path, const QuantPlan& plan,
                     const std::string& out_path, const std::string& source) {
  write_file_atomically(qdq_model_bytes(model_path, plan, source), out_path);
}

}  // namespace kiln::frontend
