// Reshape, Flatten, Squeeze and Unsqueeze groups are storage aliases: no
// kernel, the output placed in the input's storage by the memory plan. So is
// a Concat along a dim with only 1s before it: its inputs are written in
// place inside its output. Built by the whole build and run by the runtime,
// against the reference interpreter; a view that is a graph output keeps its
// copy kernel, as does a concat whose inputs cannot be placed.
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

size_t offset_of(const nlohmann::json& mod, const std::string& value) {
  for (const auto& t : mod["tensors"])
    if (t["name"] == value) return t["offset"].get<size_t>();
  ADD_FAILURE() << "no tensor " << value;
  return 0;
}

// Two softmaxes (each also read by an output, so each is its own group)
// concatenated over the channels of a batch-1 value, the concat read by two
// outputs: the softmaxes write their rows side by side inside the concat's
// storage, and no concat kernel runs.
TEST(StorageAlias, ConcatInputsAreWrittenInPlace) {
  GraphBuilder b(6);
  std::string x = b.input("x", {1, 4, 3, 8});
  std::string y = b.input("y", {1, 2, 3, 8});
  std::string a = b.node("Softmax", {x});
  std::string s = b.node("Softmax", {y});
  std::string c = b.node("Concat", {a, s}, {{"axis", int64_t{1}}});
  b.output(b.node("Relu", {c}));
  b.output(b.node("Neg", {c}));
  b.output(b.node("Abs", {a}));
  b.output(b.node("Exp", {s}));
  std::vector<graph::FusedGroup> groups = graph::fuse_ops(b.graph());
  int views = 0;
  for (const graph::FusedGroup& grp : groups)
    if (auto v = graph::concat_view(b.graph(), grp)) {
      ++views;
      EXPECT_EQ(v->output, c);
      EXPECT_EQ(v->inputs, (std::vector<std::string>{a, s}));
      EXPECT_EQ(v->offsets, (std::vector<size_t>{0, 4 * 3 * 8 * 4}));
    }
  EXPECT_EQ(views, 1);
  Built built = build_and_run(b);
  EXPECT_EQ(built.module.funcs.size(), 6u);  // 2 softmaxes, 4 elementwise outputs
  const int storage = storage_of(built.mod, c);
  EXPECT_EQ(storage_of(built.mod, a), storage);
  EXPECT_EQ(storage_of(built.mod, s), storage);
  EXPECT_EQ(offset_of(built.mod, a), offset_of(built.mod, c));
  EXPECT_EQ(offset_of(built.mod, s), offset_of(built.mod, c) + 4 * 3 * 8 * 4);
}

// Concats that stay copies: one over a dim with a 2 before it (its inputs
// are not contiguous runs of the output), one of a graph input, and two
// that share an input (DenseNet's features join several concats).
TEST(StorageAlias, ConcatsThatCannotBePlacedKeepTheirKernels) {
  GraphBuilder b(7);
  std::string x = b.input("x", {2, 3, 8});
  std::string y = b.input("y", {2, 5, 8});
  std::string a = b.node("Softmax", {x});
  std::string s = b.node("Softmax", {y});
  std::string strided = b.node("Concat", {a, s}, {{"axis", int64_t{1}}});
  b.output(b.node("Relu", {strided}));
  b.output(b.node("Neg", {strided}));
  std::string z = b.input("z", {1, 3, 8});
  std::string t = b.node("Softmax", {z});
  std::string u = b.node("Softmax", {b.node("Neg", {z})});
  std::string of_input = b.node("Concat", {z, t}, {{"axis", int64_t{1}}});
  std::string shared1 = b.node("Concat", {t, u}, {{"axis", int64_t{1}}});
  std::string shared2 = b.node("Concat", {u, t}, {{"axis", int64_t{1}}});
  for (const std::string& v : {of_input, shared1, shared2}) {
    b.output(b.node("Relu", {v}));
    b.output(b.node("Neg", {v}));
  }
  Built built = build_and_run(b);
  int concat_kernels = 0;
  for (const auto& k : built.mod["kernels"])
    for (const auto& op : k["op_types"]) concat_kernels += op == "Concat";
  EXPECT_EQ(concat_kernels, 4);
  EXPECT_NE(storage_of(built.mod, a), storage_of(built.mod, strided));
  EXPECT_NE(storage_of(built.mod, t), storage_of(built.mod, shared1));
}

}  // namespace
}  // namespace kiln
