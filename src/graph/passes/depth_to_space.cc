#include "graph/passes/depth_to_space.h"

#include <string>
#include <vector>

#include "graph/passes/pass_util.h"

namespace kiln::graph::passes {

namespace {

using Ints = std::vector<int64_t>;

struct Shuffle {
  Ints split, perm, merged;
};

// The spec's definitions (N, C, H, W input, blocksize b).
Shuffle shuffle_of(const Node& n, const Ints& x, int64_t b) {
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3];
  if (n.op_type == "SpaceToDepth")
    return {{N, C, H / b, b, W / b, b}, {0, 3, 5, 1, 2, 4}, {N, C * b * b, H / b, W / b}};
  const bool crd = n.attr<std::string>("mode").value_or("DCR") == "CRD";
  if (crd)
    return {{N, C / (b * b), b, b, H, W}, {0, 1, 4, 2, 5, 3}, {N, C / (b * b), H * b, W * b}};
  return {{N, b, b, C / (b * b), H, W}, {0, 3, 4, 1, 5, 2}, {N, C / (b * b), H * b, W * b}};
}

bool rewritable(const Graph& g, const Node& n, int64_t* b) {
  if ((n.op_type != "DepthToSpace" && n.op_type != "SpaceToDepth") ||
      !(n.domain.empty() || n.domain == "ai.onnx") || n.inputs.size() != 1 || n.outputs.size() != 1)
    return false;
  const TensorType* x = g.type_of(n.inputs[0]);
  *b = n.attr<int64_t>("blocksize").value_or(0);
  if (!x || x->shape.size() != 4 || *b < 1) return false;
  return n.op_type == "DepthToSpace" ? x->shape[1] % (*b * *b) == 0
                                     : x->shape[2] % *b == 0 && x->shape[3] % *b == 0;
}

}  // namespace

int depth_to_space_as_transpose(Graph& g) {
  return expand_nodes(g, [&g](const Node& n, std::vector<Node>& out) {
    int64_t b = 0;
    if (!rewritable(g, n, &b)) return false;
    const TensorType x = *g.type_of(n.inputs[0]);
    const Shuffle s = shuffle_of(n, x.shape, b);
    auto value = [&](const std::string& what, const Ints& shape) {
      std::string v = unique_value_name(g, n.name + "/" + what);
      g.value_info[v] = {x.dtype, shape};
      return v;
    };
    auto shape_constant = [&](const std::string& what, const Ints& shape) {
      std::string v = unique_value_name(g, n.name + "/" + what);
      set_initializer(g, v, int64_tensor(shape));
      return v;
    };
    Node split{"Reshape",
               "",
               n.name + "/split",
               {n.inputs[0], shape_constant("split_shape", s.split)},
               {value("split", s.split)},
               {}};
    Ints moved(s.perm.size());
    for (size_t i = 0; i < moved.size(); ++i) moved[i] = s.split[static_cast<size_t>(s.perm[i])];
    Node move{"Transpose",       "", n.name + "/move", {split.outputs[0]}, {value("moved", moved)},
              {{"perm", s.perm}}};
    Node merge{"Reshape",         "",
               n.name + "/merge", {move.outputs[0], shape_constant("merged_shape", s.merged)},
               {n.outputs[0]},    {}};
    out.push_back(std::move(split));
    out.push_back(std::move(move));
    out.push_back(std::move(merge));
    return true;
  });
}

}  // namespace kiln::graph::passes
