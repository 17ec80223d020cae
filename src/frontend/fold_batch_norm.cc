// fold_batch_norms (fold_batch_norm.h).
#include "frontend/fold_batch_norm.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "frontend/onnx_convert.h"
#include "frontend/onnx_import.h"
#include "frontend/onnx_proto_io.h"

namespace kiln::frontend {
namespace {

std::string fresh_name(const std::set<std::string>& used, const std::string& base) {
  std::string name = base;
  for (int i = 2; used.count(name); ++i) name = base + "_" + std::to_string(i);
  return name;
}

}  // namespace

int fold_batch_norms(const std::string& path, const std::string& out_path) {
  onnx::ModelProto model = read_onnx_proto(path);
  onnx::GraphProto* g = model.mutable_graph();
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g->initializer()) inits[t.name()] = &t;
  std::map<std::string, int> readers;
  std::set<std::string> used;
  for (const auto& n : g->node()) {
    for (const auto& s : n.input()) ++readers[s];
    for (const auto& s : n.output()) used.insert(s);
  }
  for (const auto& o : g->output()) ++readers[o.name()];
  for (const auto& t : g->initializer()) used.insert(t.name());
  std::map<std::string, int> producer;
  for (int i = 0; i < g->node_size(); ++i)
    for (const auto& s : g->node(i).output()) producer[s] = i;

  // A float32 initializer's values, or nothing.
  auto floats = [&](const std::string& name, std::vector<float>* out,
                    std::vector<int64_t>* shape = nullptr) {
    auto it = inits.find(name);
    if (it == inits.end() || it->second->data_type() != onnx::TensorProto::FLOAT ||
        it->second->data_location() == onnx::TensorProto::EXTERNAL)
      return false;
    graph::Initializer init = convert_tensor(*it->second, path + ": initializer '" + name + "'");
    *out = init.as<float>();
    if (shape) *shape = init.type.shape;
    return true;
  };

  std::set<int> removed;
  std::set<std::string> stale;  // the Convs' old output names
  std::vector<onnx::TensorProto> added;
  int folded = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& bn = g->node(i);
    if (bn.op_type() != "BatchNormalization" ||
        !(bn.domain().empty() || bn.domain() == "ai.onnx") || bn.input_size() != 5 ||
        bn.output_size() != 1)
      continue;
    auto p = producer.find(bn.input(0));
    if (p == producer.end() || readers[bn.input(0)] != 1) continue;
    onnx::NodeProto* conv = g->mutable_node(p->second);
    if (conv->op_type() != "Conv" || conv->input_size() < 2 || conv->output_size() != 1) continue;
    std::vector<float> w, b, scale, shift, mean, var;
    std::vector<int64_t> wshape;
    if (!floats(conv->input(1), &w, &wshape) || wshape.empty()) continue;
    const int64_t m = wshape[0];
    if (conv->input_size() > 2 && !conv->input(2).empty()) {
      if (!floats(conv->input(2), &b) || static_cast<int64_t>(b.size()) != m) continue;
    } else {
      b.assign(static_cast<size_t>(m), 0.0f);
    }
    if (!floats(bn.input(1), &scale) || !floats(bn.input(2), &shift) ||
        !floats(bn.input(3), &mean) || !floats(bn.input(4), &var))
      continue;
    const size_t mc = static_cast<size_t>(m);
    if (scale.size() != mc || shift.size() != mc || mean.size() != mc || var.size() != mc) continue;
    float epsilon = 1e-5f;
    for (const auto& a : bn.attribute())
      if (a.name() == "epsilon") epsilon = a.f();
    const size_t per = w.size() / mc;
    for (size_t c = 0; c < mc; ++c) {
      // In double, as the importer's own BatchNorm fold: one rounding per value.
      const double s = scale[c] / std::sqrt(static_cast<double>(var[c]) + epsilon);
      for (size_t k = 0; k < per; ++k) w[c * per + k] = static_cast<float>(w[c * per + k] * s);
      b[c] = static_cast<float>((static_cast<double>(b[c]) - mean[c]) * s + shift[c]);
    }
    auto make = [&](const std::string& base, const std::vector<int64_t>& shape,
                    const std::vector<float>& v) {
      onnx::TensorProto t;
      t.set_name(fresh_name(used, base));
      used.insert(t.name());
      t.set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : shape) t.add_dims(d);
      t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
      added.push_back(t);
      return t.name();
    };
    const std::string wname = make(conv->input(1) + "_bn_folded", wshape, w);
    const std::string bname = make(
        conv->name().empty() ? bn.output(0) + "_bias" : conv->name() + "_bias_bn_folded", {m}, b);
    conv->set_input(1, wname);
    if (conv->input_size() > 2)
      conv->set_input(2, bname);
    else
      conv->add_input(bname);
    stale.insert(conv->output(0));
    conv->set_output(0, bn.output(0));
    removed.insert(i);
    ++folded;
  }
  if (folded == 0) return 0;

  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < g->node_size(); ++i)
    if (!removed.count(i)) *nodes.Add() = g->node(i);
  g->mutable_node()->Swap(&nodes);
  for (auto& t : added) *g->add_initializer() = std::move(t);
  // Initializers nothing reads any more (the unfolded weights, the BatchNorm
  // parameters), and their old-IR graph-input entries.
  std::set<std::string> read;
  for (const auto& n : g->node())
    for (const auto& s : n.input()) read.insert(s);
  for (const auto& o : g->output()) read.insert(o.name());
  std::set<std::string> dropped;
  auto* all = g->mutable_initializer();
  for (int i = all->size() - 1; i >= 0; --i)
    if (!read.count(all->Get(i).name())) {
      dropped.insert(all->Get(i).name());
      all->DeleteSubrange(i, 1);
    }
  auto* inputs = g->mutable_input();
  for (int i = inputs->size() - 1; i >= 0; --i)
    if (dropped.count(inputs->Get(i).name())) inputs->DeleteSubrange(i, 1);
  // The Convs' old outputs are gone: so are their shape annotations (the
  // BatchNorms' outputs keep theirs, still right).
  auto* infos = g->mutable_value_info();
  for (int i = infos->size() - 1; i >= 0; --i)
    if (stale.count(infos->Get(i).name())) infos->DeleteSubrange(i, 1);
  write_onnx_proto_atomically(model, out_path);
  return folded;
}

}  // namespace kiln::frontend
