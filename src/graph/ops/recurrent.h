// LSTM, GRU and RNN (ONNX's recurrent operators, float32): the attributes kiln
// takes, checked in one place for the reference evaluation (recurrent.cc) and
// for the pass that unrolls them over the sequence into MatMul, Split and
// elementwise nodes (graph/passes/unroll_recurrent.h). There is no kernel of
// their own: every build unrolls them.
//
// Taken: direction forward / reverse / bidirectional, layout 0 and 1,
// optional B, initial_h, initial_c and P (peepholes), GRU's
// linear_before_reset, sequence_lens (lengths from 1 to the sequence length;
// a batch entry's steps past its length leave its states alone and write
// zeros to Y), the activations ONNX lists (with activation_alpha / _beta),
// clip and LSTM's input_forget (f = 1 - i, as ONNX Runtime computes it).
// Checked (an OpError naming the node): direction, shapes, hidden_size,
// activation names and counts.
//
// clip bounds the input of every gate's activation, as ONNX Runtime does;
// like ONNX Runtime, it leaves alone the LSTM cell state that h() reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln::graph::op_util {

enum class RecurrentKind { kLstm, kGru, kRnn };

// One of the activation functions f, g, h of a direction: its canonical name
// ("Sigmoid", "LeakyRelu", ...) and the alpha / beta it takes (ONNX's defaults
// where activation_alpha / activation_beta run out).
struct Activation {
  std::string name;
  float alpha = 0, beta = 0;
};

struct RecurrentShape {
  RecurrentKind kind;
  int64_t seq, batch, input, hidden;
  int64_t directions;                // 1 or 2
  bool reverse;                      // the only direction runs backwards (direction = "reverse")
  bool batch_first;                  // layout = 1
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
  // Per direction, the functions f, g(, h): activations_per_direction() each.
  std::vector<Activation> activations;
  std::optional<float> clip;
  int64_t activations_per_direction() const {
    return kind == RecurrentKind::kLstm ? 3 : kind == RecurrentKind::kGru ? 2 : 1;
  }
  const Activation& activation(int64_t d, int64_t j) const {
    return activations.at(static_cast<size_t>(d * activations_per_direction() + j));
  }
  int64_t gates() const {
    return kind == RecurrentKind::kLstm ? 4 : kind == RecurrentKind::kGru ? 3 : 1;
  }
};

// Checks the node's attributes and its X / W / R shapes; throws OpError.
RecurrentShape recurrent_shape(const Node& node, const std::vector<int64_t>& x,
                               const std::vector<int64_t>& w, const std::vector<int64_t>& r);

// The reference value of activation a at v (clip not applied).
double apply_activation(const Activation& a, double v);

// Whether direction d (0 or 1) of the node runs from the last step to the first.
inline bool runs_backwards(const RecurrentShape& s, int64_t d) {
  return s.directions == 2 ? d == 1 : s.reverse;
}

}  // namespace kiln::graph::op_util
