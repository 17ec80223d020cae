// model_summary / write_model_with_outputs (model_outputs.h).
#include "frontend/model_outputs.h"

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "frontend/onnx_convert.h"
#include "frontend/onnx_import.h"
#include "frontend/onnx_proto_io.h"
#include "support/output_file.h"
#include "support/temp_files.h"

namespace kiln::frontend {

onnx::ModelProto read_onnx_proto(const std::string& path) {
  auto fail = [&](const std::string& why) { return ImportError(path + ": " + why); };
  if (std::filesystem::is_directory(path)) throw fail("is a directory, not an ONNX file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fail(std::string("cannot open file: ") + std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string data = bytes.str();
  if (data.empty()) throw fail("the file is empty");
  onnx::ModelProto model;
  if (!model.ParseFromString(data) || model.ir_version() <= 0 || !model.has_graph())
    throw fail("not a valid ONNX model (truncated, or not an ONNX protobuf file)");
  return model;
}

int64_t onnx_default_opset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

void write_onnx_proto_atomically(const onnx::ModelProto& model, const std::string& out_path) {
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    throw ImportError(out_path + ": the model could not be serialized (over 2 GiB?)");
  write_file_atomically(bytes, out_path);
}

void write_file_atomically(const std::string& bytes, const std::string& out_path) {
  // Written beside the output and renamed: a failure (disk full, a signal)
  // leaves no half-written model and an existing file untouched. A symlink's
  // target is replaced (the link stays), a device or FIFO written through
  // (support/output_file.h).
  try {
    support::OutputTarget target = support::resolve_output(out_path);
    support::TempFile tmp(support::output_temp_path(target));
    {
      std::ofstream out(tmp.path(), std::ios::binary | std::ios::trunc);
      if (!out) throw ImportError(out_path + ": cannot write: " + std::strerror(errno));
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      out.close();
      if (!out) throw ImportError(out_path + ": write failed: " + std::strerror(errno));
    }
    support::commit_output(tmp.path().string(), target);
  } catch (const ImportError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw ImportError(e.what());
  }
}

OnnxModelSummary model_summary(const std::string& path) {
  onnx::ModelProto model = read_onnx_proto(path);
  const onnx::GraphProto& g = model.graph();
  OnnxModelSummary s;
  s.path = path;
  s.source = path;
  s.opset = onnx_default_opset(model);
  for (const auto& t : g.initializer()) {
    s.initializers.insert(t.name());
    if (t.data_type() != onnx::TensorProto::FLOAT ||
        t.data_location() == onnx::TensorProto::EXTERNAL)
      continue;
    graph::Initializer init = convert_tensor(t, path + ": initializer '" + t.name() + "'");
    s.float_initializers[t.name()] = {init.type.shape, init.as<float>()};
  }
  for (const auto& in : g.input()) {
    if (s.initializers.count(in.name())) continue;
    OnnxInputSummary i;
    i.name = in.name();
    if (in.type().has_tensor_type()) {
      const auto& tt = in.type().tensor_type();
      i.dtype = dtype_name(tt.elem_type(), path + ": input '" + in.name() + "'");
      for (const auto& d : tt.shape().dim())
        i.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    s.inputs.push_back(std::move(i));
  }
  for (const auto& out : g.output()) s.outputs.push_back(out.name());
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    OnnxNodeSummary node;
    node.name = n.name();
    node.op_type = (n.domain().empty() || n.domain() == "ai.onnx") ? n.op_type()
                                                                   : n.domain() + ":" + n.op_type();
    node.label = n.name().empty() ? n.op_type() + "#" + std::to_string(i) : n.name();
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::INT) node.int_attrs[a.name()] = a.i();
      if (a.type() == onnx::AttributeProto::FLOAT) node.float_attrs[a.name()] = a.f();
    }
    s.nodes.push_back(std::move(node));
  }
  return s;
}

void write_model_with_outputs(const std::string& path, const std::vector<std::string>& tensors,
                              const std::string& out_path) {
  onnx::ModelProto model = read_onnx_proto(path);
  onnx::GraphProto* g = model.mutable_graph();
  // The checker wants a type with a shape on every graph output: take what
  // ONNX's inference knows (the importer clears output shapes and infers
  // them again once --input-shapes are bound, so any rank it gives is fine).
  std::map<std::string, onnx::TypeProto> inferred;
  {
    onnx::ModelProto copy = model;
    try {
      onnx::shape_inference::InferShapes(copy);
    } catch (const std::exception&) {
      // Left to the importer, which reports inference errors with context.
    }
    for (const auto& v : copy.graph().value_info()) inferred[v.name()] = v.type();
  }
  std::set<std::string> present;
  for (const auto& out : g->output()) present.insert(out.name());
  for (const std::string& t : tensors) {
    if (!present.insert(t).second) continue;
    onnx::ValueInfoProto* v = g->add_output();
    v->set_name(t);
    auto it = inferred.find(t);
    if (it != inferred.end() && it->second.has_tensor_type() &&
        it->second.tensor_type().has_shape()) {
      *v->mutable_type() = it->second;
    } else {
      v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
      v->mutable_type()->mutable_tensor_type()->mutable_shape();
    }
  }
  write_onnx_proto_atomically(model, out_path);
}

}  // namespace kiln::frontend
