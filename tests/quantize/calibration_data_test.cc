// Calibration data forms and their errors (src/quantize/calibration_data.h).
#include "quantize/calibration_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace kiln::quantize {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path path = fs::temp_directory_path() / ("kiln_calib_data_" + std::to_string(::getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

runtime::NDArray iota(std::vector<int64_t> shape, float start = 0) {
  runtime::NDArray a = runtime::NDArray::empty(shape, runtime::DType::f32());
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = start + static_cast<float>(i);
  return a;
}

frontend::OnnxModelSummary model() {
  frontend::OnnxModelSummary m;
  m.path = "m.onnx";
  m.inputs = {{"x", "float32", {1, 2, -1}}, {"y", "float32", {3}}};
  return m;
}

std::string message_of(const std::string& path) {
  try {
    load_calibration(path, model());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CalibrationData, StackedSamplesSplitAlongTheNewLeadingAxis) {
  Dir d;
  const std::string f = (d.path / "calib.npz").string();
  std::vector<runtime::NamedArray> arrays;
  arrays.push_back({"x", iota({4, 1, 2, 5})});
  arrays.push_back({"y", iota({4, 3}, 100)});
  runtime::write_npz(f, arrays);
  std::vector<CalibrationSample> s = load_calibration(f, model());
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[2].inputs[0].name, "x");
  EXPECT_EQ(s[2].inputs[0].array.shape(), (std::vector<int64_t>{1, 2, 5}));
  EXPECT_EQ(s[2].inputs[0].array.data_as<float>()[0], 20.0f);  // sample 2 starts at 2 * 10
  EXPECT_EQ(s[3].inputs[1].array.data_as<float>()[2], 100.0f + 3 * 3 + 2);
  EXPECT_EQ(s[1].origin, f + " sample 1");
}

TEST(CalibrationData, AFolderIsOneSamplePerFile) {
  Dir d;
  for (int i = 0; i < 3; ++i) {
    std::vector<runtime::NamedArray> arrays;
    arrays.push_back({"x", iota({1, 2, 5}, static_cast<float>(i))});
    arrays.push_back({"y", iota({3})});
    runtime::write_npz((d.path / ("s" + std::to_string(i) + ".npz")).string(), arrays);
  }
  std::vector<CalibrationSample> s = load_calibration(d.path.string(), model());
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[1].inputs[0].array.data_as<float>()[0], 1.0f);
}

TEST(CalibrationData, ErrorsNameTheFileAndTheTensor) {
  Dir d;
  auto write = [&](const std::string& name, runtime::NDArray x, runtime::NDArray y) {
    std::vector<runtime::NamedArray> arrays;
    arrays.push_back({"x", std::move(x)});
    arrays.push_back({"y", std::move(y)});
    const std::string f = (d.path / name).string();
    runtime::write_npz(f, arrays);
    return f;
  };
  // The batch axis used as the sample axis: rank one short.
  std::string f = write("unstacked.npz", iota({1, 2, 5}), iota({4, 3}));
  std::string msg = message_of(f);
  EXPECT_NE(msg.find(f + ": array 'x' has shape [1, 2, 5]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("new leading axis: [N, 1, 2, ?]"), std::string::npos) << msg;
  // A static axis that differs.
  f = write("axis.npz", iota({4, 1, 3, 5}), iota({4, 3}));
  EXPECT_NE(message_of(f).find("array 'x' has shape [4, 1, 3, 5]"), std::string::npos);
  // Different sample counts.
  f = write("counts.npz", iota({4, 1, 2, 5}), iota({2, 3}));
  EXPECT_NE(message_of(f).find("array 'y' stacks 2 samples, array 'x' 4"), std::string::npos);
  // A missing input and an extra array.
  {
    std::vector<runtime::NamedArray> arrays;
    arrays.push_back({"x", iota({4, 1, 2, 5})});
    arrays.push_back({"z", iota({4, 3})});
    f = (d.path / "names.npz").string();
    runtime::write_npz(f, arrays);
    msg = message_of(f);
    EXPECT_NE(msg.find(f + ": no array 'y' for the model input 'y'"), std::string::npos) << msg;
  }
  // A wrong dtype.
  {
    std::vector<runtime::NamedArray> arrays;
    arrays.push_back({"x", iota({4, 1, 2, 5})});
    runtime::NDArray y = runtime::NDArray::empty({4, 3}, runtime::DType::f64());
    std::memset(y.data(), 0, static_cast<size_t>(y.nbytes()));
    arrays.push_back({"y", std::move(y)});
    f = (d.path / "dtype.npz").string();
    runtime::write_npz(f, arrays);
    EXPECT_NE(message_of(f).find("array 'y' is float64; the model input is float32"),
              std::string::npos);
  }
  EXPECT_NE(message_of((d.path / "missing.npz").string()).find("no such calibration file"),
            std::string::npos);
}

TEST(CalibrationData, DynamicAxesMustAgreeAcrossSamples) {
  Dir d;
  for (int i = 0; i < 2; ++i) {
    std::vector<runtime::NamedArray> arrays;
    arrays.push_back({"x", iota({1, 2, 5 + i})});
    arrays.push_back({"y", iota({3})});
    runtime::write_npz((d.path / ("s" + std::to_string(i) + ".npz")).string(), arrays);
  }
  std::string msg = message_of(d.path.string());
  EXPECT_NE(msg.find("s1.npz: array 'x' has shape [1, 2, 6]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("every sample needs the same shapes"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln::quantize
