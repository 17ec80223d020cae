// Builds small ONNX models in C++ with the ONNX protobuf API, for the
// frontend tests: no Python, no model files in the repository.
#pragma once

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::test {

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int64_t opset = 17) {
    model_.set_ir_version(8);
    model_.set_producer_name("kiln-frontend-tests");
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto* graph() { return model_.mutable_graph(); }

  // dims: a number is a static axis, anything else a symbolic (dynamic) one.
  void input(const std::string& name, const std::vector<std::string>& dims,
             int elem = onnx::TensorProto::FLOAT) {
    set_value(graph()->add_input(), name, dims, elem);
  }
  void output(const std::string& name, const std::vector<std::string>& dims,
              int elem = onnx::TensorProto::FLOAT) {
    set_value(graph()->add_output(), name, dims, elem);
  }

  // Float weights in raw_data (how PyTorch writes them).
  onnx::TensorProto* init_f32(const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<float>& data) {
    auto* t = tensor(graph()->add_initializer(), name, dims, onnx::TensorProto::FLOAT);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(data.data()), data.size() * 4));
    return t;
  }
  // int64 data in the typed field, the other storage form.
  onnx::TensorProto* init_i64(const std::string& name, const std::vector<int64_t>& dims,
                              const std::vector<int64_t>& data) {
    auto* t = tensor(graph()->add_initializer(), name, dims, onnx::TensorProto::INT64);
    for (int64_t v : data) t->add_int64_data(v);
    return t;
  }

  onnx::NodeProto* node(const std::string& op, const std::string& name,
                        const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
    auto* n = graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }

  static void attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = attr(n, name, onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = attr(n, name, onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_ints(onnx::NodeProto* n, const std::string& name,
                        const std::vector<int64_t>& v) {
    auto* a = attr(n, name, onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  std::string bytes() const { return model_.SerializeAsString(); }

  // Writes the model to a fresh file under the test temp directory.
  std::string write(const std::string& file) const { return write_bytes(file, bytes()); }

  static std::string write_bytes(const std::string& file, const std::string& data) {
    std::string path = (temp_dir().path / file).string();
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }

 private:
  // One directory per process (ctest runs tests, and other checkouts run
  // theirs, in parallel), removed when the test process exits.
  struct TempDir {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("kiln_frontend_tests_" + std::to_string(::getpid()));
    TempDir() { std::filesystem::create_directories(path); }
    ~TempDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static TempDir& temp_dir() {
    static TempDir dir;
    return dir;
  }

  static void set_value(onnx::ValueInfoProto* v, const std::string& name,
                        const std::vector<std::string>& dims, int elem) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0])))
        dim->set_dim_value(std::stoll(d));
      else
        dim->set_dim_param(d);
    }
  }
  static onnx::TensorProto* tensor(onnx::TensorProto* t, const std::string& name,
                                   const std::vector<int64_t>& dims, int elem) {
    t->set_name(name);
    t->set_data_type(elem);
    for (int64_t d : dims) t->add_dims(d);
    return t;
  }
  static onnx::AttributeProto* attr(onnx::NodeProto* n, const std::string& name,
                                    onnx::AttributeProto::AttributeType type) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }

  onnx::ModelProto model_;
};

// 0, 1, 2, ... scaled: recognizable, deterministic weights.
inline std::vector<float> ramp(size_t n, float scale = 0.01f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * scale;
  return v;
}

}  // namespace kiln::test
