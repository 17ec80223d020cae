// collect_statistics (collect.h).
#include "quantize/collect.h"

#include <memory>
#include <set>
#include <stdexcept>

#include "driver/build.h"
#include "runtime/graph_executor.h"
#include "support/temp_files.h"

namespace kiln::quantize {
namespace {

// "--input-shapes" text binding every input to the samples' shapes (they
// agree across samples: load_calibration checked).
std::string input_shapes_of(const CalibrationSample& s) {
  std::string text;
  for (const auto& in : s.inputs) {
    text += (text.empty() ? "" : ",") + in.name + ":[";
    for (size_t i = 0; i < in.array.shape().size(); ++i)
      text += (i ? "," : "") + std::to_string(in.array.shape()[i]);
    text += "]";
  }
  return text;
}

}  // namespace

std::map<std::string, TensorStats> collect_statistics(const frontend::OnnxModelSummary& model,
                                                      const std::vector<std::string>& tensors,
                                                      const std::vector<CalibrationSample>& samples,
                                                      bool histograms,
                                                      const codegen::Target& target,
                                                      const driver::ConfigChooser& choose_configs) {
  std::map<std::string, TensorStats> stats;
  if (tensors.empty() || samples.empty()) return stats;
  std::map<std::string, size_t> input_index;
  for (size_t i = 0; i < model.inputs.size(); ++i) input_index[model.inputs[i].name] = i;
  std::vector<std::string> from_graph;
  for (const std::string& t : tensors) {
    stats[t];
    if (!input_index.count(t)) from_graph.push_back(t);
  }
  for (const std::string& t : tensors)
    if (input_index.count(t) && model.inputs[input_index[t]].dtype != "float32")
      throw std::runtime_error(model.name() + ": input '" + t + "' is " +
                               model.inputs[input_index[t]].dtype +
                               ", not float32: it cannot be calibrated");

  support::TempDir dir("calib");
  std::unique_ptr<runtime::GraphExecutor> ex;
  std::vector<size_t> output_index;  // of each from_graph tensor
  if (!from_graph.empty()) {
    const std::string observed = (dir.path() / "observed.onnx").string();
    frontend::write_model_with_outputs(model.path, from_graph, observed);
    driver::BuildOptions options;
    options.target = target;
    options.choose_configs = choose_configs;
    options.input_shapes = input_shapes_of(samples[0]);
    options.output_path = (dir.path() / "observed.tar").string();
    try {
      driver::build(observed, options);
    } catch (const std::exception& e) {
      // The build names the temporary copy with extra outputs, removed by now: name the model.
      std::string why = e.what();
      if (why.rfind(observed + ": ", 0) == 0) why.erase(0, observed.size() + 2);
      throw std::runtime_error(model.name() +
                               ": building the float model for calibration failed: " + why);
    }
    ex =
        std::make_unique<runtime::GraphExecutor>(runtime::GraphExecutor::load(options.output_path));
    for (const std::string& t : from_graph) {
      size_t k = 0;
      while (k < ex->outputs().size() && ex->outputs()[k].name != t) ++k;
      if (k == ex->outputs().size())
        throw std::runtime_error(model.name() + ": the calibration build has no output '" + t +
                                 "'");
      if (ex->outputs()[k].dtype != runtime::DType::f32())
        throw std::runtime_error(model.name() + ": tensor '" + t + "' is " +
                                 ex->outputs()[k].dtype.str() + ", not float32");
      output_index.push_back(k);
    }
  }

  for (int pass = 0; pass < (histograms ? 2 : 1); ++pass) {
    for (const CalibrationSample& s : samples) {
      auto observe = [&](const std::string& t, const float* x, size_t n) {
        if (pass == 0)
          stats[t].observe_range(x, n, s.origin + ": tensor '" + t + "'");
        else
          stats[t].observe_histogram(x, n);
      };
      for (const std::string& t : tensors) {
        auto it = input_index.find(t);
        if (it == input_index.end()) continue;
        const runtime::NDArray& a = s.inputs[it->second].array;
        observe(t, a.data_as<float>(), static_cast<size_t>(a.numel()));
      }
      if (!ex) continue;
      for (const auto& in : s.inputs) ex->set_input(in.name, in.array);
      ex->run();
      for (size_t k = 0; k < from_graph.size(); ++k) {
        const runtime::TensorInfo& info = ex->outputs()[output_index[k]];
        observe(from_graph[k], static_cast<const float*>(ex->output_data(output_index[k])),
                static_cast<size_t>(info.nbytes() / 4));
      }
    }
  }
  return stats;
}

}  // namespace kiln::quantize
