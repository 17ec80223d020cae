// Issue 65 #7 and #16: where an output path leads. A regular file is replaced
// whole (a temporary renamed over it); a symlink is followed to its target,
// which is replaced and the link kept; a character device or a FIFO is
// written through, never replaced by a regular file; `-` is stdout where the
// format allows it. For `build -o`, `run --output`, `quantize -o` (its
// writer, frontend/onnx_proto_io.h) and `records export -o`. And
// `records sync` refuses a URL scheme kiln does not speak and a database
// synced with itself.
//
// kiln runs here as whoever runs the tests: as root a private character
// device (a copy of /dev/null made with mknod in the scratch folder) stands in
// for /dev/null, so that a kiln that replaces it cannot damage the system.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "driver_harness.h"
#include "frontend/onnx_proto_io.h"
#include "runtime/npz.h"
#include "tuner/records.h"

namespace kiln::test {
namespace {

bool is_char_device(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}
bool is_fifo(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}
bool is_symlink(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

// /dev/null, or as root a private node of the same device in `dir`; "" when
// that cannot be made (no CAP_MKNOD).
std::string null_device(const ScratchDir& dir) {
  if (::geteuid() != 0) return "/dev/null";
  std::string p = dir.file("null");
  if (::mknod(p.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) return "";
  return p;
}

// Reads a FIFO to its end on a thread. finish() returns what was read; when
// nobody wrote (a kiln that replaced the FIFO instead), it opens and closes a
// writer so that the reader is not left waiting.
class FifoReader {
 public:
  explicit FifoReader(std::string path) : path_(std::move(path)) {
    thread_ = std::thread([this] {
      std::ifstream in(path_, std::ios::binary);
      std::ostringstream s;
      s << in.rdbuf();
      got_ = s.str();
      done_ = true;
    });
  }
  std::string finish() {
    for (int i = 0; !done_ && i < 1000; ++i) {
      int fd = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    thread_.join();
    return got_;
  }
  ~FifoReader() {
    if (thread_.joinable()) finish();
  }

 private:
  std::string path_, got_;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

std::string make_fifo(const ScratchDir& dir, const std::string& name) {
  std::string p = dir.file(name);
  EXPECT_EQ(::mkfifo(p.c_str(), 0644), 0) << p;
  return p;
}

// x[1, 8, 6, 6] -> Conv 3x3 (8 -> 16) -> Relu -> y.
OnnxBuilder tiny_model() {
  std::mt19937 rng(3);
  OnnxBuilder b;
  b.input("x", {"1", "8", "6", "6"});
  b.output("y", {"1", "16", "6", "6"});
  conv(b, "conv1", "x", "c", {8, 16}, rng);
  b.node("Relu", "relu1", {"c"}, {"y"});
  return b;
}

class OutputTargets : public ::testing::Test {
 protected:
  CommandResult kiln(const std::string& args) { return run_kiln(args, tmp_, capture_); }
  // A database with two records (of a template this kiln does not know).
  std::string make_db() {
    std::string db = work_.file("a.db");
    tuner::RecordDB records = tuner::RecordDB::open(db);
    for (int i = 0; i < 2; ++i) {
      tuner::Record r;
      r.workload_key = "test_op.x86(n=" + std::to_string(i) + ")";
      r.target_key = "llvm -mtriple=x86_64-pc-linux-gnu; features=+avx2; threads=1";
      r.config_json = "{\"tile\":" + std::to_string(i + 1) + "}";
      r.times_ms = {0.5, 0.25};
      r.timestamp_unix = 1700000000 + i;
      r.kiln_version = "0.1.0";
      r.gflops = 1.0;
      records.add(r);
    }
    return db;
  }
  ScratchDir work_, tmp_, capture_;
};

TEST_F(OutputTargets, RecordsExportWritesThroughDevicesFifosAndFollowsLinks) {
  std::string db = make_db();
  std::string plain = work_.file("plain.jsonl");
  ASSERT_EQ(kiln("records export " + quote(db) + " -o " + quote(plain)).status, 0);
  const std::string want = read_bytes(plain);
  ASSERT_NE(want.find("test_op.x86(n=1)"), std::string::npos) << want;

  for (const char* best : {"", " --best"}) {
    SCOPED_TRACE(best[0] ? "--best" : "all records");
    std::string expect = best[0] ? "" : want;
    if (best[0]) {  // --best's own text, from a plain file
      ASSERT_EQ(kiln("records export " + quote(db) + best + " -o " + quote(plain)).status, 0);
      expect = read_bytes(plain);
    }
    // A symlink: followed, its target replaced, the link kept.
    std::string target = work_.file(std::string("target") + (best[0] ? "-best" : "") + ".jsonl");
    std::string link = work_.file(std::string("link") + (best[0] ? "-best" : "") + ".jsonl");
    write_bytes(target, "old\n");
    fs::create_symlink(target, link);
    CommandResult r = kiln("records export " + quote(db) + best + " -o " + quote(link));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(is_symlink(link));
    EXPECT_EQ(read_bytes(target), expect);
    // A dangling link: its target is created.
    std::string made = work_.file(std::string("made") + (best[0] ? "-best" : ""));
    std::string dangling = work_.file(std::string("dangling") + (best[0] ? "-best" : ""));
    fs::create_symlink(made, dangling);
    r = kiln("records export " + quote(db) + best + " -o " + quote(dangling));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(is_symlink(dangling));
    EXPECT_EQ(read_bytes(made), expect);
    // A FIFO: streamed into, still a FIFO.
    std::string fifo = make_fifo(work_, std::string("fifo") + (best[0] ? "-best" : ""));
    FifoReader reader(fifo);
    r = kiln("records export " + quote(db) + best + " -o " + quote(fifo));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(reader.finish(), expect);
    EXPECT_TRUE(is_fifo(fifo));
    // A character device: written through, still a device.
    std::string dev = null_device(work_);
    if (!dev.empty()) {
      r = kiln("records export " + quote(db) + best + " -o " + quote(dev));
      EXPECT_EQ(r.status, 0) << r.err;
      EXPECT_TRUE(is_char_device(dev)) << dev << " was replaced";
      if (dev != "/dev/null") fs::remove(dev);
    }
    // stdout, as `-` and as /dev/fd/1.
    for (const char* out : {"-", "/dev/fd/1"}) {
      r = kiln("records export " + quote(db) + best + " -o " + out);
      EXPECT_EQ(r.status, 0) << out << ": " << r.err;
      EXPECT_EQ(r.out, expect) << out;
    }
  }
  // A folder is refused, naming it.
  CommandResult r = kiln("records export " + quote(db) + " -o " + quote(work_.path().string()));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("it is a directory"), std::string::npos) << r.err;
  // So are the files sqlite keeps beside the database (issue 65 #9), there or not.
  for (const char* suffix : {"-wal", "-shm"}) {
    r = kiln("records export " + quote(db) + " -o " + quote(db + suffix));
    EXPECT_EQ(r.status, 1) << suffix;
    EXPECT_NE(r.err.find(std::string("the '") + suffix + "' file of the database"),
              std::string::npos)
        << r.err;
  }
  EXPECT_EQ(tuner::RecordDB::open(db).count(), 2u);
}

TEST_F(OutputTargets, BuildAndRunWriteThroughDevicesFifosAndFollowsLinks) {
  std::string model = work_.file("tiny.onnx");
  write_bytes(model, tiny_model().bytes());
  // build -o LINK: the package lands in the link's target.
  fs::create_directories(work_.file("pkgs"));
  std::string pkg = work_.file("pkgs/tiny.tar"), link = work_.file("tiny.tar");
  write_bytes(pkg, "old");
  fs::create_symlink(pkg, link);
  CommandResult r = kiln("build " + quote(model) + " -o " + quote(link));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(is_symlink(link));
  EXPECT_GT(fs::file_size(pkg), 1000u);
  // build -o DEVICE, a FIFO (a .so), and `-` refused (its summary goes to stdout).
  std::string dev = null_device(work_);
  if (!dev.empty()) {
    r = kiln("build " + quote(model) + " -o " + quote(dev));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(is_char_device(dev)) << dev << " was replaced";
    if (dev != "/dev/null") fs::remove(dev);
  }
  {
    std::string fifo = make_fifo(work_, "so-fifo");
    FifoReader reader(fifo);
    r = kiln("build " + quote(model) + " --output-format so -o " + quote(fifo));
    EXPECT_EQ(r.status, 0) << r.err;
    std::string so = reader.finish();
    EXPECT_EQ(so.substr(0, 4),
              "\x7f"
              "ELF");
    EXPECT_TRUE(is_fifo(fifo));
  }
  r = kiln("build " + quote(model) + " -o -");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot go to stdout"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists("-"));

  // run --output: the same.
  std::vector<runtime::NamedArray> in;
  runtime::NDArray x = runtime::NDArray::empty({1, 8, 6, 6}, runtime::DType::parse("float32"));
  for (int64_t i = 0; i < 8 * 36; ++i) static_cast<float*>(x.data())[i] = float(i % 7) - 3;
  in.push_back({"x", std::move(x)});
  std::string inputs = work_.file("in.npz");
  runtime::write_npz(inputs, in);
  std::string run = "run " + quote(link) + " --inputs " + quote(inputs) + " --output ";
  std::string plain = work_.file("out.npz");
  ASSERT_EQ(kiln(run + quote(plain)).status, 0);
  const std::string want = read_bytes(plain);
  ASSERT_EQ(runtime::read_npz(plain).size(), 1u);
  std::string target = work_.file("target.npz"), out_link = work_.file("out-link.npz");
  write_bytes(target, "old");
  fs::create_symlink(target, out_link);
  r = kiln(run + quote(out_link));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(is_symlink(out_link));
  EXPECT_EQ(read_bytes(target), want);
  {
    std::string fifo = make_fifo(work_, "npz-fifo");
    FifoReader reader(fifo);
    r = kiln(run + quote(fifo));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(reader.finish(), want);
    EXPECT_TRUE(is_fifo(fifo));
  }
  dev = null_device(work_);
  if (!dev.empty()) {
    r = kiln(run + quote(dev));
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(is_char_device(dev)) << dev << " was replaced";
    if (dev != "/dev/null") fs::remove(dev);
  }
  r = kiln(run + "-");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, want);
  EXPECT_FALSE(fs::exists("-"));
  r = kiln(run + "- --print-time");
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("--output - writes the npz to stdout"), std::string::npos) << r.err;
}

// quantize -o writes through frontend::write_file_atomically.
TEST_F(OutputTargets, TheModelWriterWritesThroughDevicesFifosAndFollowsLinks) {
  const std::string bytes = "model bytes\n";
  std::string target = work_.file("q.onnx"), link = work_.file("q-link.onnx");
  write_bytes(target, "old");
  fs::create_symlink(target, link);
  frontend::write_file_atomically(bytes, link);
  EXPECT_TRUE(is_symlink(link));
  EXPECT_EQ(read_bytes(target), bytes);
  std::string fifo = make_fifo(work_, "q-fifo");
  FifoReader reader(fifo);
  frontend::write_file_atomically(bytes, fifo);
  EXPECT_EQ(reader.finish(), bytes);
  EXPECT_TRUE(is_fifo(fifo));
  std::string dev = null_device(work_);
  if (!dev.empty()) {
    frontend::write_file_atomically(bytes, dev);
    EXPECT_TRUE(is_char_device(dev)) << dev << " was replaced";
  }
  try {
    frontend::write_file_atomically(bytes, work_.path().string());
    ADD_FAILURE() << "a folder was written";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("it is a directory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(tmp_.entries().empty());
}

TEST_F(OutputTargets, RecordsSyncRefusesOtherSchemesAndItself) {
  std::string db = make_db();
  CommandResult r = kiln("records sync " + quote(db) + " mysql://h/db");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unsupported scheme 'mysql'; kiln stores records in sqlite files or "
                       "postgresql:// URLs"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("unable to open database file"), std::string::npos) << r.err;
  r = kiln("records sync mysql://h/db " + quote(db));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("unsupported scheme 'mysql'"), std::string::npos) << r.err;
  std::string link = work_.file("link.db");
  fs::create_symlink(db, link);
  for (const std::string& to : {db, link, work_.file("./a.db")}) {
    r = kiln("records sync " + quote(db) + " " + quote(to));
    EXPECT_EQ(r.status, 1) << to;
    EXPECT_NE(r.err.find("are the same database"), std::string::npos) << r.err;
  }
  EXPECT_EQ(tuner::RecordDB::open(db).count(), 2u);
}

}  // namespace
}  // namespace kiln::test
