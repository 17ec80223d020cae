// A blocked template's kernel with SiLU fused after it, as EfficientNet's
// blocks have it: y = z * sigmoid(z), z = anchor + bias[channel] (the
// channel's block and lane: bias is [C/cb, cb]). For the tests of heavy
// epilogues (depthwise_epilogue_test.cc, conv2d_epilogue_test.cc).
#pragma once

#include <vector>

#include "ir/tensor.h"
#include "ops/op_template.h"
#include "schedule/config_space.h"
#include "schedule/schedule.h"

namespace kiln::test {

// args: the template's inputs, bias, y.
struct SiluKernel {
  schedule::Schedule sch;
  std::vector<ir::Tensor> args;
};

inline SiluKernel silu_kernel(const ops::OpTemplate& t, const ops::Workload& w,
                              const schedule::Config& cfg) {
  ops::TemplateInstance inst = t.compute(w, cfg);
  const auto& shape = inst.anchor->shape;  // [n, C/cb, oh, ow, cb]
  ir::Tensor bias = ir::placeholder({shape[1], shape[4]}, ir::DataType::f32(), "bias");
  ir::Tensor z = ir::compute(
      shape,
      [&](const std::vector<ir::Var>& i) {
        return ir::read(inst.anchor, {i.begin(), i.end()}) + ir::at(bias, i[1], i[4]);
      },
      "add");
  ir::Tensor y = ir::compute(
      shape,
      [&](const std::vector<ir::Var>& i) {
        ir::Expr v = ir::read(z, {i.begin(), i.end()});
        return v * ir::call(ir::Intrinsic::Sigmoid, {v});
      },
      "silu");
  SiluKernel k{schedule::create_schedule({y}), {inst.inputs[0], inst.inputs[1], bias, y}};
  t.schedule(k.sch, inst, y, cfg);
  return k;
}

}  // namespace kiln::test
