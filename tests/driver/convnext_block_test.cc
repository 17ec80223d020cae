// A tiny ConvNeXt, end to end: a stem (conv, norm), two stages of channels-last blocks (as
// torchvision exports them at opset 17: depthwise conv, Transpose to NHWC,
// LayerNormalization, Linear, the Erf GELU, Linear, Transpose back, layer
// scale, residual add) joined by a downsample layer (Transpose,
// LayerNormalization, Transpose, 2x2 stride-2 conv). The package must equal
// the interpreter on the imported graph, and no Transpose or layout
// transform may run between the blocks: only the transform into the blocked
// layout and the one out of it remain.
#include <gtest/gtest.h>

#include <random>

#include "driver_harness.h"

namespace kiln::test {
namespace {

void transpose(OnnxBuilder& b, const std::string& name, const std::string& x, const std::string& y,
               const std::vector<int64_t>& perm) {
  OnnxBuilder::attr_ints(b.node("Transpose", name, {x}, {y}), "perm", perm);
}

void layer_norm(OnnxBuilder& b, const std::string& name, const std::string& x, const std::string& y,
                int64_t c, std::mt19937& rng) {
  init_random(b, name + ".g", {c}, rng, 0.5f, 1.5f);
  init_random(b, name + ".b", {c}, rng, -0.5f, 0.5f);
  auto* n = b.node("LayerNormalization", name, {x, name + ".g", name + ".b"}, {y});
  OnnxBuilder::attr_int(n, "axis", -1);
  OnnxBuilder::attr_float(n, "epsilon", 1e-6f);
}

// y = x @ W + bias, W [cin, cout] (nn.Linear on the last axis).
void linear(OnnxBuilder& b, const std::string& name, const std::string& x, const std::string& y,
            int64_t cin, int64_t cout, std::mt19937& rng) {
  float s = 1.5f / std::sqrt(static_cast<float>(cin));
  init_random(b, name + ".w", {cin, cout}, rng, -s, s);
  init_random(b, name + ".bias", {cout}, rng, -0.3f, 0.3f);
  b.node("MatMul", name + "/matmul", {x, name + ".w"}, {name + ".mm"});
  b.node("Add", name + "/add", {name + ".mm", name + ".bias"}, {y});
}

// GELU as PyTorch exports it before opset 20: x * 0.5 * (1 + erf(x / sqrt 2)).
void gelu(OnnxBuilder& b, const std::string& name, const std::string& x, const std::string& y) {
  b.node("Div", name + "/div", {x, "sqrt2"}, {name + ".d"});
  b.node("Erf", name + "/erf", {name + ".d"}, {name + ".e"});
  b.node("Add", name + "/add", {name + ".e", "one"}, {name + ".a"});
  b.node("Mul", name + "/mul", {x, name + ".a"}, {name + ".m"});
  b.node("Mul", name + "/half", {name + ".m", "half"}, {y});
}

// One ConvNeXt block on x [1, c, h, w] writing y.
void block(OnnxBuilder& b, const std::string& name, const std::string& x, const std::string& y,
           int64_t c, std::mt19937& rng) {
  conv(b, name + "/dw", x, name + ".dw", {c, c, 7, 7, 1, 3, c}, rng);
  transpose(b, name + "/to_nhwc", name + ".dw", name + ".t", {0, 2, 3, 1});
  layer_norm(b, name + "/ln", name + ".t", name + ".ln", c, rng);
  linear(b, name + "/fc1", name + ".ln", name + ".h", c, 4 * c, rng);
  gelu(b, name + "/gelu", name + ".h", name + ".g");
  linear(b, name + "/fc2", name + ".g", name + ".o", 4 * c, c, rng);
  transpose(b, name + "/to_nchw", name + ".o", name + ".back", {0, 3, 1, 2});
  init_random(b, name + ".scale", {c, 1, 1}, rng, 0.1f, 1.f);
  b.node("Mul", name + "/layer_scale", {name + ".back", name + ".scale"}, {name + ".s"});
  b.node("Add", name + "/residual", {name + ".s", x}, {y});
}

TEST(ConvNeXt, BlocksRunInTheBlockedLayoutWithoutTransposes) {
  std::mt19937 rng(23);
  OnnxBuilder b;
  b.input("x", {"1", "3", "10", "14"});
  output_any(b, "y", 4);
  b.init_f32("sqrt2", {}, {std::sqrt(2.0f)});
  b.init_f32("one", {}, {1.0f});
  b.init_f32("half", {}, {0.5f});
  // The stem: a 2x2 stride-2 conv and a norm over channels (LayerNorm2d).
  conv(b, "stem/conv", "x", "stem.c", {3, 24, 2, 2, 2, 0}, rng);
  transpose(b, "stem/to_nhwc", "stem.c", "stem.t", {0, 2, 3, 1});
  layer_norm(b, "stem/ln", "stem.t", "stem.ln", 24, rng);
  transpose(b, "stem/to_nchw", "stem.ln", "stem", {0, 3, 1, 2});
  block(b, "s1b1", "stem", "a1", 24, rng);
  block(b, "s1b2", "a1", "a2", 24, rng);
  transpose(b, "down/to_nhwc", "a2", "down.t", {0, 2, 3, 1});
  layer_norm(b, "down/ln", "down.t", "down.ln", 24, rng);
  transpose(b, "down/to_nchw", "down.ln", "down.n", {0, 3, 1, 2});
  conv(b, "down/conv", "down.n", "d", {24, 40, 2, 2, 2, 0}, rng);
  block(b, "s2b1", "d", "y", 40, rng);
  E2EResult r = check_end_to_end(b, "convnext_tiny_blocks");

  size_t transforms = 0, norms = 0, convs = 0;
  for (const auto& k : r.mod.at("kernels")) {
    for (const auto& op : k.at("op_types")) {
      EXPECT_NE(op, "Transpose") << k.dump();
      EXPECT_NE(op, "MatMul") << k.dump();
      norms += op == "kiln.ChannelNorm";
      convs += op.get<std::string>().find("conv2d") != std::string::npos;
    }
    transforms += k.at("op_types") == nlohmann::json({"kiln.LayoutTransform"});
  }
  // The stem conv, three blocks of (depthwise, 1x1, 1x1), the downsample conv.
  EXPECT_EQ(convs, 11u) << r.mod.at("kernels").dump();
  EXPECT_EQ(norms, 5u) << r.mod.at("kernels").dump();
  // Into NCHW[x]c at the first conv, out of it at the graph output; any
  // transform between two blocks would be a third.
  EXPECT_LE(transforms, 2u) << r.mod.at("kernels").dump();
}

}  // namespace
}  // namespace kiln::test
