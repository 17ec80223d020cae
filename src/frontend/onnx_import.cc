// import_onnx: parse -> opset -> operator support -> checker -> bind input
// shapes -> shape inference -> graph::Graph. Inner steps throw without the
// file name; import_onnx prefixes it once, so every message names the file.
#include "frontend/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "frontend/constant_branches.h"
#include "frontend/einsum_shapes.h"
#include "frontend/host_region.h"
#include "frontend/host_subgraphs.h"
#include "frontend/inline_functions.h"
#include "frontend/legacy_ops.h"
#include "frontend/onnx_convert.h"
#include "frontend/op_support.h"
#include "frontend/opset_upgrade.h"
#include "frontend/pool_ceil_mode.h"
#include "frontend/quantized_ops.h"
#include "frontend/shape_folding.h"
#include "frontend/signal_shapes.h"

namespace kiln::frontend {
namespace {

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

onnx::ModelProto read_model(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw ImportError("is a directory, not an ONNX file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImportError(std::string("cannot open file: ") + std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string data = bytes.str();
  if (data.empty()) throw ImportError("the file is empty");
  onnx::ModelProto model;
  // Protobuf says only yes or no: a cut inside any nested message fails here.
  if (!model.ParseFromString(data))
    throw ImportError("not a valid ONNX model (truncated, or not an ONNX protobuf file)");
  // Arbitrary bytes can parse as a protobuf of unknown fields: require the
  // fields every ONNX exporter writes.
  if (model.ir_version() <= 0 || !model.has_graph())
    throw ImportError("not an ONNX model (no ir_version or no graph; truncated or not ONNX?)");
  return model;
}

int64_t default_opset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  throw ImportError("the model imports no default-domain (ai.onnx) opset");
}

// Opsets 1 to kMaxOpset; those before kMinOpset are refused here once the version converter
// ran (upgrade_opset).
void check_opset(const onnx::ModelProto& model, int64_t lowest = kMinOpset) {
  const int64_t v = default_opset(model);
  if (v < lowest || v > kMaxOpset)
    throw ImportError("opset " + std::to_string(v) +
                      " is not supported (kiln accepts opsets 1 to " + std::to_string(kMaxOpset) +
                      "; re-export the model with one of them)");
}

// Operators added or redefined in opset 18 (ONNX 1.13): ReduceMean & co.
// take their axes as an input, Split gains num_outputs, Pad axes, Resize
// antialias.
const std::set<std::string>& new_in_opset18() {
  static const std::set<std::string> ops = {"BitwiseAnd",
                                            "BitwiseNot",
                                            "BitwiseOr",
                                            "BitwiseXor",
                                            "CenterCropPad",
                                            "Col2Im",
                                            "GroupNormalization",
                                            "LpPool",
                                            "Mish",
                                            "OptionalGetElement",
                                            "OptionalHasElement",
                                            "Pad",
                                            "ReduceL1",
                                            "ReduceL2",
                                            "ReduceLogSum",
                                            "ReduceLogSumExp",
                                            "ReduceMax",
                                            "ReduceMean",
                                            "ReduceMin",
                                            "ReduceProd",
                                            "ReduceSumSquare",
                                            "Resize",
                                            "ScatterElements",
                                            "ScatterND",
                                            "Split"};
  return ops;
}

// Debian 12's ONNX 1.12 knows opsets up to 17. An opset-18 model is checked
// and inferred with the newest schemas the library has, which is right for
// every operator that opset 18 left alone; the others would fail deep in the
// checker, so name them here.
void check_library_knows(const onnx::ModelProto& model, const std::vector<std::string>& names) {
  const int64_t opset = default_opset(model);
  const int64_t known =
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
  if (opset <= known) return;
  std::vector<std::string> bad;
  const auto& g = model.graph();
  for (int i = 0; i < g.node_size(); ++i)
    if (new_in_opset18().count(g.node(i).op_type()))
      bad.push_back("'" + names[i] + "' (" + g.node(i).op_type() + ")");
  if (!bad.empty())
    throw ImportError(
        "opset " + std::to_string(opset) + " redefines the operator of " + join(bad, ", ") +
        ", but the ONNX library kiln was built with knows opsets "
        "up to " +
        std::to_string(known) + "; re-export the model at opset " + std::to_string(known));
}

// ONNX node names are optional and need not be unique; errors and later
// passes need a unique one, so a nameless or repeated node gets
// "<op_type>_<index>".
std::vector<std::string> node_names(const onnx::GraphProto& g) {
  std::vector<std::string> names;
  std::set<std::string> used;
  for (int i = 0; i < g.node_size(); ++i) {
    std::string name = g.node(i).name();
    if (name.empty() || used.count(name)) name = g.node(i).op_type() + "_" + std::to_string(i);
    while (used.count(name)) name += "_";
    used.insert(name);
    names.push_back(name);
  }
  return names;
}

void check_operators(const onnx::GraphProto& g, const std::vector<std::string>& names) {
  graph::Graph skeleton;
  for (int i = 0; i < g.node_size(); ++i) {
    graph::Node n;
    n.op_type = g.node(i).op_type();
    n.domain = g.node(i).domain() == "ai.onnx" ? "" : g.node(i).domain();
    n.name = names[i];
    skeleton.nodes.push_back(std::move(n));
  }
  std::vector<std::string> bad = unsupported_nodes(skeleton);
  if (!bad.empty())
    throw ImportError(std::to_string(bad.size()) +
                      " node(s) use operators kiln does not support: " + join(bad, ", "));
}

std::set<std::string> initializer_names(const onnx::GraphProto& g) {
  std::set<std::string> names;
  for (const auto& t : g.initializer()) names.insert(t.name());
  return names;
}

// Graph inputs that are fed at run time: before IR version 4 initializers
// were listed as inputs too.
std::vector<onnx::ValueInfoProto*> runtime_inputs(onnx::GraphProto* g) {
  const std::set<std::string> inits = initializer_names(*g);
  std::vector<onnx::ValueInfoProto*> out;
  for (auto& in : *g->mutable_input())
    if (!inits.count(in.name())) out.push_back(&in);
  return out;
}

std::string dim_str(const onnx::TensorShapeProto::Dimension& d) {
  if (d.has_dim_value()) return std::to_string(d.dim_value());
  return d.has_dim_param() ? "'" + d.dim_param() + "'" : "?";
}

// Sets `shape` to `dims`, or returns why it cannot (rank, static axis).
std::string bind_one(const std::string& name, onnx::TypeProto_Tensor* tt,
                     const std::vector<int64_t>& dims) {
  auto* shape = tt->mutable_shape();
  if (shape->dim_size() == 0 && tt->has_shape() && !dims.empty())
    return "input '" + name + "' is a scalar but --input-shapes gives " + graph::shape_str(dims);
  if (shape->dim_size() != 0 && shape->dim_size() != static_cast<int>(dims.size()))
    return "input '" + name + "' has rank " + std::to_string(shape->dim_size()) +
           " but --input-shapes gives " + graph::shape_str(dims) + " (rank " +
           std::to_string(dims.size()) + ")";
  for (int i = 0; i < shape->dim_size(); ++i) {
    const auto& d = shape->dim(i);
    if (d.has_dim_value() && d.dim_value() != dims[i])
      return "input '" + name + "' axis " + std::to_string(i) + " is fixed at " +
             std::to_string(d.dim_value()) + " but --input-shapes gives " + std::to_string(dims[i]);
  }
  shape->clear_dim();
  for (int64_t v : dims) shape->add_dim()->set_dim_value(v);
  return "";
}

// Lists every dynamic axis of an unbound input.
void check_static(const std::string& name, const onnx::TypeProto_Tensor& tt,
                  std::vector<std::string>* problems) {
  if (!tt.has_shape()) {
    problems->push_back("input '" + name + "' has no shape");
    return;
  }
  for (int i = 0; i < tt.shape().dim_size(); ++i)
    if (!tt.shape().dim(i).has_dim_value())
      problems->push_back("input '" + name + "' axis " + std::to_string(i) + " (" +
                          dim_str(tt.shape().dim(i)) + ") is dynamic");
}

void bind_input_shapes(onnx::GraphProto* g, const InputShapes& shapes) {
  std::vector<onnx::ValueInfoProto*> inputs = runtime_inputs(g);
  std::vector<std::string> names;
  for (auto* in : inputs) names.push_back("'" + in->name() + "'");
  for (const auto& [key, dims] : shapes) {
    bool found = false;
    for (auto* in : inputs) found |= in->name() == key;
    if (!found)
      throw ImportError("--input-shapes names '" + key +
                        "', which is not an input of the model; its inputs are " +
                        join(names, ", "));
  }
  std::vector<std::string> problems;
  for (auto* in : inputs) {
    // Sequences and optionals go to the host region, shapes unbound.
    if (is_host_only_type(in->type())) continue;
    if (!in->type().has_tensor_type())
      throw ImportError("input '" + in->name() + "' is not a tensor, a sequence or an optional");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    auto it = shapes.find(in->name());
    if (it == shapes.end()) {
      check_static(in->name(), *tt, &problems);
    } else if (std::string why = bind_one(in->name(), tt, it->second); !why.empty()) {
      problems.push_back(why);
    }
  }
  if (!problems.empty())
    throw ImportError(join(problems, "; ") +
                      " (bind every dynamic axis with --input-shapes \"name:[d0,d1,...]\")");
}

// Strict ONNX shape inference: node-level errors throw, and Shape->...->Reshape
// chains are propagated so that Reshape outputs get static shapes.
void infer_shapes(onnx::ModelProto* model) {
  auto* g = model->mutable_graph();
  // The exporter's value_info and output shapes may carry symbolic axes that
  // the bound inputs now fix; drop them so inference writes concrete ones.
  g->clear_value_info();
  for (auto& out : *g->mutable_output())
    if (out.type().has_tensor_type()) out.mutable_type()->mutable_tensor_type()->clear_shape();
  onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1,
                                      /*data_prop=*/true);
  onnx::shape_inference::InferShapes(*model, onnx::OpSchemaRegistry::Instance(), options);
  // Extents ONNX 1.12 leaves out, then inference again for what follows them.
  // Each round types at least one more Einsum: at most one round per node.
  for (int round = 0; round < model->graph().node_size() && type_einsum_outputs(model) > 0; ++round)
    onnx::shape_inference::InferShapes(*model, onnx::OpSchemaRegistry::Instance(), options);
}

// infer_shapes, then OneHot outputs that ONNX 1.12 leaves with a symbolic
// depth typed from their constant depth, and inference again for what reads
// them, until nothing more is typed.
//
// ONNX 1.12 types no graph output at all when one of them is a graph input or an initializer
// (outputs [x, Relu(x)] left Relu's y untyped: issue 65 #12). Those outputs sit inference out
// and come back in their places with the input's or the initializer's type.
void infer_shapes(onnx::ModelProto* model, const std::vector<std::string>& names) {
  onnx::GraphProto* g = model->mutable_graph();
  std::map<std::string, onnx::TypeProto> sources;  // graph inputs and initializers
  for (const auto& t : g->initializer()) {
    onnx::TypeProto type;
    type.mutable_tensor_type()->set_elem_type(t.data_type());
    auto* shape = type.mutable_tensor_type()->mutable_shape();
    for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
    sources[t.name()] = type;
  }
  for (const auto& in : g->input()) sources[in.name()] = in.type();
  const google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> outputs = g->output();
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> computed;
  for (const auto& o : outputs)
    if (!sources.count(o.name())) *computed.Add() = o;
  const bool passthrough = computed.size() != outputs.size();
  if (passthrough) *g->mutable_output() = computed;

  infer_shapes(model);
  onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1,
                                      /*data_prop=*/true);
  while (complete_constant_shaped_types(model, names) > 0)
    onnx::shape_inference::InferShapes(*model, onnx::OpSchemaRegistry::Instance(), options);

  if (!passthrough) return;
  std::map<std::string, onnx::ValueInfoProto> inferred;
  for (const auto& o : g->output()) inferred[o.name()] = o;
  g->clear_output();
  for (const auto& o : outputs) {
    onnx::ValueInfoProto* back = g->add_output();
    if (auto it = sources.find(o.name()); it != sources.end()) {
      *back = o;
      *back->mutable_type() = it->second;
    } else {
      *back = inferred.at(o.name());
    }
  }
}

// untyped_outputs() restricted to values some node or the graph reads.
std::vector<std::string> used_untyped_outputs(const onnx::ModelProto& model) {
  std::set<std::string> used;
  for (const auto& n : model.graph().node())
    for (const auto& in : n.input()) used.insert(in);
  for (const auto& o : model.graph().output()) used.insert(o.name());
  std::vector<std::string> out;
  for (const std::string& v : untyped_outputs(model))
    if (used.count(v)) out.push_back(v);
  return out;
}

// Constant nodes become initializers, before shape inference: ONNX infers
// Reshape/Expand/Slice outputs from initializer data but (in 1.12) not from
// Constant outputs, and later passes then see one kind of constant.
// `names` stays parallel to the graph's nodes.
void fold_constant_nodes(onnx::GraphProto* g, std::vector<std::string>* names) {
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  std::vector<std::string> kept_names;
  for (int i = 0; i < g->node_size(); ++i) {
    const onnx::NodeProto& n = g->node(i);
    const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
    if (onnx_domain && n.op_type() == "Constant" && n.output_size() == 1) {
      *g->add_initializer() = constant_tensor(n, "node '" + (*names)[i] + "' (Constant)");
    } else {
      *kept.Add() = n;
      kept_names.push_back((*names)[i]);
    }
  }
  g->mutable_node()->Swap(&kept);
  *names = std::move(kept_names);
}

void convert_values(const onnx::GraphProto& g, graph::Graph* out) {
  for (const auto& t : g.initializer()) {
    out->initializers[t.name()] = convert_tensor(t, "initializer '" + t.name() + "'");
    out->value_info[t.name()] = out->initializers[t.name()].type;
  }
  for (const auto& in : g.input()) {
    if (out->initializers.count(in.name())) continue;
    graph::ValueInfo vi{in.name(), {}};
    convert_type(in.type(), "input '" + in.name() + "'", &vi.type);  // static once bound
    out->inputs.push_back(vi);
  }
  // A value listed twice as a graph output would be two package outputs on
  // one tensor, which the runtime rightly calls corrupt: refused here, by name.
  std::set<std::string> seen;
  for (const auto& o : g.output()) {
    if (!seen.insert(o.name()).second)
      throw ImportError("graph output '" + o.name() + "' is listed twice (outputs must differ)");
    out->outputs.push_back(o.name());
  }
  for (const auto* list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto& vi : *list) {
      graph::TensorType t;
      if (convert_type(vi.type(), "value '" + vi.name() + "'", &t)) out->value_info[vi.name()] = t;
    }
}

void convert_nodes(const onnx::GraphProto& g, const std::vector<std::string>& names,
                   graph::Graph* out) {
  for (int i = 0; i < g.node_size(); ++i) {
    out->nodes.push_back(convert_node(g.node(i), names[i]));
  }
}

// Weights stored outside the .onnx file (ONNX external data) would fail in
// the checker or in shape inference with a message about something else:
// named here first, with the way out.
void check_no_external_data(const onnx::GraphProto& g) {
  for (const auto& t : g.initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
    std::string location;
    for (const auto& kv : t.external_data())
      if (kv.key() == "location") location = kv.value();
    throw ImportError("external data: initializer '" + t.name() + "' keeps its values in " +
                      (location.empty() ? "another file" : "'" + location + "'") +
                      "; kiln reads weights from the .onnx file itself (save the model with "
                      "onnx.save_model(model, path, save_as_external_data=False))");
  }
}

// The declared rank of a value before shape inference: a graph input's or an
// initializer's; -1 when unknown.
int declared_rank(const onnx::GraphProto& g, const std::string& value) {
  for (const auto& t : g.initializer())
    if (t.name() == value) return t.dims_size();
  for (const auto& in : g.input())
    if (in.name() == value && in.type().tensor_type().has_shape())
      return in.type().tensor_type().shape().dim_size();
  return -1;
}

// ONNX's shape inference for convolutions and pooling indexes its inputs'
// dimensions by the window attributes' lengths without checking them (a
// 1-element `strides` on a 2-D convolution reads past an array and crashes;
// found by fuzz/onnx_import_fuzzer.cc): every length must agree with the
// number of spatial axes, as far as the ranks declared in the file tell it.
template <typename Bad>
void check_window_ranks(const onnx::GraphProto& g, const onnx::NodeProto& n, Bad&& bad) {
  std::vector<std::pair<std::string, int>> lengths;  // attribute, spatial axes it covers
  for (const onnx::AttributeProto& a : n.attribute()) {
    const std::string& name = a.name();
    if (name == "pads" && a.ints_size() % 2 != 0)
      bad("attribute pads has " + std::to_string(a.ints_size()) +
          " values (begin and end per axis)");
    if (name == "strides" || name == "dilations" || name == "kernel_shape" || name == "pads" ||
        name == "output_padding" || name == "output_shape")
      lengths.push_back({name, a.ints_size() / (name == "pads" ? 2 : 1)});
  }
  // Spatial axes of the data (input 0) and of a convolution's weight (input 1).
  const bool has_weight = n.op_type() == "Conv" || n.op_type() == "ConvTranspose" ||
                          n.op_type() == "ConvInteger" || n.op_type() == "DeformConv";
  std::vector<std::pair<std::string, int>> axes;  // input, its spatial axes
  for (int i = 0; i < std::min(n.input_size(), has_weight ? 2 : 1); ++i) {
    const int rank = declared_rank(g, n.input(i));
    if (rank < 0) continue;
    if (rank < 3)
      bad("input '" + n.input(i) + "' has rank " + std::to_string(rank) +
          "; a window operator needs rank >= 3 (N, C and at least one spatial axis)");
    axes.push_back({"input '" + n.input(i) + "'", rank - 2});
  }
  for (const auto& input : axes) {
    if (input.second != axes.front().second)
      bad(axes.front().first + " and " + input.first + " differ in rank");
    for (const auto& attr : lengths)
      if (attr.second != input.second)
        bad("attribute " + attr.first + " is for " + std::to_string(attr.second) +
            " spatial axes but " + input.first + " has " + std::to_string(input.second));
  }
  for (const auto& attr : lengths)
    if (attr.second != lengths.front().second)
      bad("attributes " + lengths.front().first + " and " + attr.first +
          " are for different numbers of spatial axes");
}

// Window attributes that ONNX's shape inference divides by (a stride or
// dilation of 0 kills the process with SIGFPE inside libonnx; found by
// fuzz/onnx_import_fuzzer.cc) and that the checker does not look at: strides,
// dilations, kernel_shape and group must be positive, pads non-negative.
void check_window_attributes(const onnx::GraphProto& g, const std::vector<std::string>& names) {
  static const std::set<std::string> kWindowed = {
      "Conv",        "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool",
      "AveragePool", "LpPool",        "MaxUnpool",   "DeformConv",  "Col2Im"};
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (!n.domain().empty() || !kWindowed.count(n.op_type())) continue;
    auto bad = [&](const std::string& what) {
      throw ImportError("node '" + names[i] + "' (" + n.op_type() + "): " + what);
    };
    check_window_ranks(g, n, bad);
    for (const onnx::AttributeProto& a : n.attribute()) {
      const bool positive =
          a.name() == "strides" || a.name() == "dilations" || a.name() == "kernel_shape";
      if (positive || a.name() == "pads") {
        for (int k = 0; k < a.ints_size(); ++k)
          if (positive ? a.ints(k) <= 0 : a.ints(k) < 0)
            bad("attribute " + a.name() + " has " + std::to_string(a.ints(k)) + " at position " +
                std::to_string(k) + " (every value must be " +
                (positive ? "positive" : "non-negative") + ")");
      } else if (a.name() == "group" && a.i() <= 0) {
        bad("attribute group is " + std::to_string(a.i()) + " (it must be positive)");
      }
    }
  }
}

graph::Graph import_model(const std::string& path, const InputShapes& input_shapes) {
  install_signal_shape_inference();  // ONNX 1.12's STFT shapes disagree with STFT
  onnx::ModelProto model = read_model(path);
  check_opset(model, 1);
  // Opsets 1 to 10 (the ONNX model zoo, older exporters) come up to kiln's
  // oldest through ONNX's version converter; newer ones are checked as written.
  upgrade_opset(&model, kMinOpset);
  check_opset(model);
  // Operators ONNX defines as functions of others run as their bodies where
  // kiln has no kernel of its own.
  inline_onnx_functions(&model);
  check_no_external_data(model.graph());
  std::vector<std::string> names = node_names(model.graph());
  check_operators(model.graph(), names);
  check_library_knows(model, names);
  check_window_attributes(model.graph(), names);
  onnx::checker::check_model(model);
  fold_constant_nodes(model.mutable_graph(), &names);
  bind_input_shapes(model.mutable_graph(), input_shapes);
  infer_shapes(&model, names);
  // Values that inference could not type (a Slice whose ends come from a Div
  // of a Shape) get types once the small constant subgraphs before them are
  // folded; each round folds at least one node, so this ends.
  while (!untyped_outputs(model).empty() && fold_small_constants(&model, &names) > 0)
    infer_shapes(&model, names);
  // An If whose condition folds to a constant becomes the branch it takes.
  while (has_if(model)) {
    const int folded = fold_small_constants(&model, &names);
    if (folded + inline_constant_branches(&model, &names) == 0) break;
    infer_shapes(&model, names);
    while (!untyped_outputs(model).empty() && fold_small_constants(&model, &names) > 0)
      infer_shapes(&model, names);
  }
  if (drop_pool_windows_starting_in_padding(&model)) infer_shapes(&model, names);
  // Values whose shapes depend on data, and the nodes that read them, run in
  // the executor on run-time shaped tensors (host_region.h).
  graph::HostRegion host;
  split_host_region(&model, &names, &host);
  // What inference still leaves untyped would fail later, far from the
  // model: name it now (ONNX 1.12 stops, for instance, at a graph output
  // named like a graph input or an initializer).
  if (std::vector<std::string> untyped = used_untyped_outputs(model); !untyped.empty())
    throw ImportError("ONNX shape inference gave no type to '" + untyped.front() + "'" +
                      (untyped.size() > 1
                           ? " (and " + std::to_string(untyped.size() - 1) + " more values)"
                           : std::string()) +
                      "; kiln needs every value's shape at build time");
  graph::Graph g;
  convert_values(model.graph(), &g);
  convert_nodes(model.graph(), names, &g);
  g.host = std::move(host);
  upgrade_legacy_ops(&g, default_opset(model));
  check_quantized_nodes(g, default_opset(model));
  return g;
}

}  // namespace

void check_model_opset(const std::string& path) {
  try {
    check_opset(read_model(path), 1);
  } catch (const std::exception& e) {
    throw ImportError(path + ": " + e.what());
  }
}

graph::Graph import_onnx(const std::string& path, const InputShapes& input_shapes) {
  try {
    return import_model(path, input_shapes);
  } catch (const onnx::checker::ValidationError& e) {
    throw ImportError(path + ": ONNX checker: " + e.what());
  } catch (const onnx::InferenceError& e) {
    throw ImportError(path + ": ONNX shape inference: " + e.what());
  } catch (const std::exception& e) {
    throw ImportError(path + ": " + e.what());
  }
}

}  // namespace kiln::frontend
