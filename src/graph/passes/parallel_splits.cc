#include "graph/passes/parallel_splits.h"

#include <functional>
#include <set>

namespace kiln::graph {
namespace {

const char* const kDirectConv = "conv2d_NCHWc.x86";
// Lane-window convolutions: a few weights per channel, so they follow their
// input like an elementwise kernel.
const std::set<std::string> kFollowingTemplates = {"depthwise_conv2d_NCHWc.x86",
                                                   "group_conv2d_lanes_NCHWc.x86"};

int64_t bytes_of(const Graph& g, const std::string& value) {
  const TensorType* t = value.empty() ? nullptr : g.type_of(value);
  if (!t) return 0;
  return t->num_elements() * static_cast<int64_t>(dtype_size(t->dtype));
}

// Which way each value's writer split it, as the kernels are decided.
class SplitOfValues {
 public:
  SplitOfValues(const Graph& g, const std::map<std::string, std::vector<std::string>>& views)
      : g_(g), views_(views) {}

  void set(const std::string& value, bool rows) { rows_[value] = rows; }

  // A value nobody in the graph wrote (a graph input) counts as rows: the
  // first kernel to read it decides. A view follows its first source with a
  // known writer.
  bool rows(const std::string& value) const {
    if (auto it = rows_.find(value); it != rows_.end()) return it->second;
    if (auto it = views_.find(value); it != views_.end())
      for (const std::string& source : it->second)
        if (written(source)) return rows(source);
    return true;
  }

  // The input a kernel without weights follows: its largest activation (a
  // residual Add's two are equal: the first), not a weight.
  std::string main_input(const std::vector<std::string>& inputs) const {
    std::string best;
    int64_t best_bytes = -1;
    for (const std::string& in : inputs) {
      if (in.empty() || g_.initializers.count(in)) continue;
      const int64_t b = bytes_of(g_, in);
      if (b > best_bytes) {
        best = in;
        best_bytes = b;
      }
    }
    return best;
  }

 private:
  bool written(const std::string& value) const { return rows_.count(value) || views_.count(value); }

  const Graph& g_;
  const std::map<std::string, std::vector<std::string>>& views_;
  std::map<std::string, bool> rows_;
};

const Node* template_anchor(const Graph& g, const FusedGroup& group) {
  if (group.anchor < 0) return nullptr;
  const Node& n = g.nodes.at(static_cast<size_t>(group.anchor));
  return n.op_type == "kiln.Template" ? &n : nullptr;
}

// The input whose split a kernel follows: a template's data input, else the
// group's largest activation (not a weight).
std::string followed_input(const Graph& g, const FusedGroup& group, const SplitOfValues& values) {
  if (const Node* anchor = template_anchor(g, group)) return anchor->inputs.at(0);
  return values.main_input(group.inputs);
}

bool follows_its_input(const Graph& g, const FusedGroup& group) {
  const Node* anchor = template_anchor(g, group);
  return !anchor || kFollowingTemplates.count(anchor->attr<std::string>("template").value_or(""));
}

std::vector<int64_t> shape_of(const Graph& g, const std::string& value) {
  const TensorType* t = value.empty() ? nullptr : g.type_of(value);
  return t ? t->shape : std::vector<int64_t>{};
}

// A kernel that sums (or pools) whole NCHW[x]c planes into one pixel, as
// GlobalAveragePool does: it can only share channel blocks between threads.
bool reduces_whole_planes(const Graph& g, const FusedGroup& group, const std::string& input) {
  if (template_anchor(g, group) || group.outputs.size() != 1) return false;
  const std::vector<int64_t> in = shape_of(g, input), out = shape_of(g, group.outputs[0]);
  // NCHW[x]c in; NCHW[x]c or NCHW out (a pool before a Flatten): H and W at 2 and 3.
  return in.size() == 5 && (out.size() == 5 || out.size() == 4) && out[2] == 1 && out[3] == 1 &&
         in[2] * in[3] > 1;
}

// The values that should be written by channel blocks: those a whole-plane
// reduction reads (a squeeze-excitation's pooling), and, back through the
// kernels that follow their input, what those kernels read. A tensor read
// by such a reduction on both cores was otherwise read across them, and its
// storage then written again by a core that had to take every line back
// (EfficientNet-B0's depthwise convs as AVX2 code ran 1.5-2x slower on 2
// threads, and not on one, when they split by rows ahead of their SE block).
std::set<std::string> values_wanting_channels(
    const Graph& g, const std::vector<FusedGroup>& groups, const SplitOfValues& values,
    const std::map<std::string, std::vector<std::string>>& views) {
  std::set<std::string> wanted;
  std::function<void(const std::string&)> want = [&](const std::string& v) {
    if (!wanted.insert(v).second) return;
    if (auto it = views.find(v); it != views.end())
      for (const std::string& source : it->second) want(source);
  };
  for (auto it = groups.rbegin(); it != groups.rend(); ++it) {
    const std::string in = followed_input(g, *it, values);
    if (in.empty()) continue;
    bool output_wanted = false;
    for (const std::string& out : it->outputs) output_wanted = output_wanted || wanted.count(out);
    if (reduces_whole_planes(g, *it, in) || (output_wanted && follows_its_input(g, *it))) want(in);
  }
  return wanted;
}

ParallelSplit split_of_template(const Graph& g, const Node& anchor, const SplitOfValues& values) {
  const std::string name = anchor.attr<std::string>("template").value_or("");
  const std::string& data = anchor.inputs.at(0);
  ParallelSplit s;
  s.input_rows = values.rows(data);
  if (name == kDirectConv && anchor.inputs.size() >= 2) {
    const int64_t activations = bytes_of(g, data) + bytes_of(g, anchor.outputs.at(0));
    s.rows = activations >= bytes_of(g, anchor.inputs[1]);
  } else if (kFollowingTemplates.count(name)) {
    s.rows = s.input_rows;
  }
  return s;
}

}  // namespace

std::vector<ParallelSplit> choose_parallel_splits(
    const Graph& g, const std::vector<FusedGroup>& kernel_groups,
    const std::map<std::string, std::vector<std::string>>& view_sources) {
  SplitOfValues values(g, view_sources);
  const std::set<std::string> channels =
      values_wanting_channels(g, kernel_groups, values, view_sources);
  std::vector<ParallelSplit> splits;
  for (const FusedGroup& group : kernel_groups) {
    ParallelSplit s;
    if (const Node* anchor = template_anchor(g, group)) {
      s = split_of_template(g, *anchor, values);
    } else {
      const std::string in = values.main_input(group.inputs);
      s.input_rows = s.rows = in.empty() || values.rows(in);
    }
    for (const std::string& out : group.outputs) s.rows = s.rows && !channels.count(out);
    for (const std::string& out : group.outputs) values.set(out, s.rows);
    splits.push_back(s);
  }
  return splits;
}

}  // namespace kiln::graph
