// Reshape, Flatten, Squeeze and Unsqueeze groups are storage aliases: no
// kernel, the output placed in the input's storage by the memory plan. Built
// by the whole build and run by the runtime, against the reference
// interpreter; a view that is a graph output keeps its copy kernel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "driver/build.h"
#include "graph/passes/fuse_ops.h"
#include "graph_builder.h"
#include "runtime/graph_executor.h"

namespace kiln {
namespace {

using test::GraphBuilder;

struct Built {
  driver::BuiltModule module;
  nlohmann::json mod;
  std::map<std::string, graph::Initializer> got;
};

// Builds `g`, runs it on the builder's inputs and checks every output
// against the reference interpreter.
Built build_and_run(const GraphBuilder& b) {
  const std::string pkg = (std::filesystem::temp_directory_path() /
                           ("kiln-alias-test-" + std::to_string(getpid()) + ".tar"))
                              .string();
  driver::BuildOptions options;
  options.output_path = pkg;
  Built r;
  r.module = driver::build_module(b.graph(), options);
  r.mod = nlohmann::json::parse(r.module.graph_json);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  std::filesystem::remove(pkg);
  for (const auto& [name, v] : b.inputs())
    ex.set_input(name, v.data.data(), runtime::DType::f32(), v.type.shape);
  ex.run();
  auto want = graph::run_graph(b.graph(), b.inputs());
  for (size_t i = 0; i < b.graph().outputs.size(); ++i) {
    const std::string& name = b.graph().outputs[i];
    graph::Initializer got = test::make_tensor("float32", want.at(name).type.shape);
    std::memcpy(got.data.data(), ex.output_data(i), got.data.size());
    r.got[name] = std::move(got);
  }
  test::expect_same_outputs(r.got, want);
  return r;
}

int storage_of(const nlohmann::json& mod, const std::string& value) {
  for (const auto& t : mod["tensors"])
    if (t["name"] == value) return t["storage"].get<int>();
  ADD_FAILURE() << "no tensor " << value;
  return -1;
}

TEST(StorageAlias, ViewGroupsAreRecognised) {
  GraphBuilder b(3);
  std::string x = b.input("x", {2, 3, 4});
  std::string r = b.node("Relu", {x});
  std::string f = b.node("Flatten", {r}, {{"axis", int64_t{1}}});
  std::string t = b.node("Transpose", {f});
  b.output(t);
  std::vector<graph::FusedGroup> groups = graph::fuse_ops(b.graph());
  // Flatten alone in a group would be a view; here it fused with the Relu and
  // the Transpose, so that group computes.
  for (const graph::FusedGroup& grp : groups)
    EXPECT_FALSE(graph::storage_alias(b.graph(), grp).has_value());
  graph::FusedGroup flatten_alone;
  flatten_alone.nodes = {1};
  flatten_alone.inputs = {r};
  flatten_alone.outputs = {f};
  auto a = graph::storage_alias(b.graph(), flatten_alone);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->first, f);
  EXPECT_EQ(a->second, r);
  graph::FusedGroup transpose_alone;
  transpose_alone.nodes = {2};
  transpose_alone.inputs = {f};
  transpose_alone.outputs = {t};
  EXPECT_FALSE(graph::storage_alias(b.graph(), transpose_alone).has_value());
  flatten_alone.outputs = {t};  // a group whose output is not the view's
  EXPECT_FALSE(graph::storage_alias(b.graph(), flatten_alone).has_value());
}

// x -> Softmax -> Reshape -> Unsqueeze -> Squeeze -> Softmax, each view also
// read by an elementwise graph output: a value with two readers ends its
// group, so each view is a group of its own, and all three live in the first
// softmax's storage. Kernels: two softmaxes and the three elementwise ops.
TEST(StorageAlias, ChainedViewsShareTheStorageAndRunNoKernel) {
  GraphBuilder b(4);
  std::string x = b.input("x", {2, 3, 8});
  std::string s1 = b.node("Softmax", {x});
  std::string r = b.node("Reshape", {s1, b.ints("shape", {6, 8})});
  std::string u = b.node("Unsqueeze", {r, b.ints("axes", {0})});
  std::string q = b.node("Squeeze", {u, b.ints("axes0", {0})});
  b.output(b.node("Softmax", {q}));
  b.output(b.node("Relu", {r}));
  b.output(b.node("Neg", {u}));
  b.output(b.node("Abs", {q}));
  Built built = build_and_run(b);
  EXPECT_EQ(built.module.funcs.size(), 5u);
  const int storage = storage_of(built.mod, s1);
  EXPECT_EQ(storage_of(built.mod, r), storage);
  EXPECT_EQ(storage_of(built.mod, u), storage);
  EXPECT_EQ(storage_of(built.mod, q), storage);
}

// A view of a graph input reads the input's own storage; a view that is a
// graph output keeps a copy kernel (graph outputs own their storage).
TEST(StorageAlias, GraphInputsAndOutputs) {
  GraphBuilder b(5);
  std::string x = b.input("x", {4, 6});
  std::string f = b.node("Reshape", {x, b.ints("shape", {24})});
  std::string s = b.node("Softmax", {f});
  b.output(b.node("Reshape", {s, b.ints("shape2", {2, 12})}));
  b.output(b.node("Relu", {f}));
  Built built = build_and_run(b);
  EXPECT_EQ(built.module.funcs.size(), 3u);  // softmax, relu, and the output's copy
  EXPECT_EQ(storage_of(built.mod, f), storage_of(built.mod, x));
}

}  // namespace
}  // namespace kiln
