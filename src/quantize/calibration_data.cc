// load_calibration (calibration_data.h).
#include "quantize/calibration_data.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>

namespace kiln::quantize {
namespace {

std::string shape_text(const std::vector<int64_t>& s, size_t from = 0) {
  std::string out = "[";
  for (size_t i = from; i < s.size(); ++i)
    out += (i > from ? ", " : "") + (s[i] < 0 ? std::string("?") : std::to_string(s[i]));
  return out + "]";
}

std::string input_names(const frontend::OnnxModelSummary& model) {
  std::string out;
  for (const auto& in : model.inputs) out += (out.empty() ? "" : ", ") + in.name;
  return out;
}

// The arrays of one file by input name; a missing input or an extra array is
// an error naming the file.
std::map<std::string, runtime::NamedArray*> match_inputs(std::vector<runtime::NamedArray>& arrays,
                                                         const frontend::OnnxModelSummary& model,
                                                         const std::string& file) {
  std::map<std::string, runtime::NamedArray*> by_name;
  for (auto& a : arrays) by_name[a.name] = &a;
  for (const auto& in : model.inputs)
    if (!by_name.count(in.name))
      throw std::runtime_error(file + ": no array '" + in.name + "' for the model input '" +
                               in.name + "' (the model's inputs: " + input_names(model) + ")");
  for (const auto& a : arrays) {
    bool known = std::any_of(model.inputs.begin(), model.inputs.end(),
                             [&](const frontend::OnnxInputSummary& i) { return i.name == a.name; });
    if (!known)
      throw std::runtime_error(file + ": array '" + a.name +
                               "' names no model input (the model's inputs: " + input_names(model) +
                               ")");
  }
  return by_name;
}

// Checks one sample's array against the input: dtype, rank, static axes.
// `lead` axes of the array come before the input's own (1 for a stack).
void check_array(const runtime::NDArray& a, const frontend::OnnxInputSummary& in,
                 const std::string& file, size_t lead) {
  const std::string what = file + ": array '" + in.name + "'";
  if (!in.dtype.empty() && a.dtype().str() != in.dtype)
    throw std::runtime_error(what + " is " + a.dtype().str() + "; the model input is " + in.dtype);
  const auto& s = a.shape();
  bool ok = s.size() == in.shape.size() + lead;
  for (size_t i = 0; ok && i < in.shape.size(); ++i)
    ok = in.shape[i] < 0 || in.shape[i] == s[i + lead];
  if (!ok)
    throw std::runtime_error(
        what + " has shape " + shape_text(s) + "; the model input is " + shape_text(in.shape) +
        (lead ? " and a stacked calibration file holds N samples along a new leading axis: [N, " +
                    shape_text(in.shape).substr(1)
              : std::string()));
}

std::vector<CalibrationSample> from_stacked(const std::string& path,
                                            const frontend::OnnxModelSummary& model) {
  std::vector<runtime::NamedArray> arrays = runtime::read_npz(path);
  auto by_name = match_inputs(arrays, model, path);
  int64_t n = -1;
  std::string first;
  for (const auto& in : model.inputs) {
    const runtime::NDArray& a = by_name[in.name]->array;
    check_array(a, in, path, 1);
    if (n < 0) {
      n = a.shape()[0];
      first = in.name;
    } else if (a.shape()[0] != n) {
      throw std::runtime_error(path + ": array '" + in.name + "' stacks " +
                               std::to_string(a.shape()[0]) + " samples, array '" + first + "' " +
                               std::to_string(n) + ": every input needs the same count");
    }
  }
  if (n <= 0) throw std::runtime_error(path + ": holds no calibration samples (N = 0)");
  std::vector<CalibrationSample> samples(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    samples[k].origin = path + " sample " + std::to_string(k);
    for (const auto& in : model.inputs) {
      const runtime::NDArray& a = by_name[in.name]->array;
      std::vector<int64_t> shape(a.shape().begin() + 1, a.shape().end());
      runtime::NDArray s = runtime::NDArray::empty(shape, a.dtype());
      const int64_t bytes = s.nbytes();
      std::memcpy(s.data(), static_cast<const char*>(a.data()) + k * bytes,
                  static_cast<size_t>(bytes));
      samples[k].inputs.push_back({in.name, std::move(s)});
    }
  }
  return samples;
}

std::vector<CalibrationSample> from_directory(const std::string& dir,
                                              const frontend::OnnxModelSummary& model) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".npz") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  if (files.empty()) throw std::runtime_error(dir + ": no .npz files in the calibration folder");
  std::vector<CalibrationSample> samples;
  for (const std::string& file : files) {
    std::vector<runtime::NamedArray> arrays = runtime::read_npz(file);
    auto by_name = match_inputs(arrays, model, file);
    CalibrationSample s;
    s.origin = file;
    for (const auto& in : model.inputs) {
      check_array(by_name[in.name]->array, in, file, 0);
      s.inputs.push_back({in.name, std::move(by_name[in.name]->array)});
    }
    samples.push_back(std::move(s));
  }
  return samples;
}

}  // namespace

std::vector<CalibrationSample> load_calibration(const std::string& path,
                                                const frontend::OnnxModelSummary& model) {
  if (!std::filesystem::exists(path))
    throw std::runtime_error(path + ": no such calibration file or folder");
  std::vector<CalibrationSample> samples =
      std::filesystem::is_directory(path) ? from_directory(path, model) : from_stacked(path, model);
  // One build serves every sample: dynamic axes must agree.
  for (const auto& s : samples)
    for (size_t i = 0; i < s.inputs.size(); ++i)
      if (s.inputs[i].array.shape() != samples[0].inputs[i].array.shape())
        throw std::runtime_error(s.origin + ": array '" + s.inputs[i].name + "' has shape " +
                                 shape_text(s.inputs[i].array.shape()) + ", " + samples[0].origin +
                                 " " + shape_text(samples[0].inputs[i].array.shape()) +
                                 ": every sample needs the same shapes");
  return samples;
}

}  // namespace kiln::quantize
