// .npy/.npz I/O: round trips of every dtype (stored and deflated, 0-d, empty,
// large), numpy-written files (stored and deflated members), hand-built .npy
// headers (versions 2.0/3.0, big-endian), and the errors for bad input.
#include "runtime/npz.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "npz_fixtures.h"

namespace kiln::test {
namespace {

using runtime::DType;
using runtime::DTypeCode;
using runtime::NamedArray;
using runtime::NDArray;
using runtime::NpzCompression;
namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    static int n = 0;
    path_ = fs::temp_directory_path() /
            ("kiln-npz-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

NDArray random_array(std::vector<int64_t> shape, DType t, std::mt19937_64& rng) {
  NDArray a = NDArray::empty(std::move(shape), t);
  auto* p = a.data_as<uint8_t>();
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t i = 0; i < a.nbytes(); ++i)
    p[i] = t.code == DTypeCode::Bool ? static_cast<uint8_t>(byte(rng) & 1)
                                     : static_cast<uint8_t>(byte(rng));
  return a;
}

void expect_same(const NDArray& a, const NDArray& b, const std::string& name) {
  SCOPED_TRACE(name);
  ASSERT_TRUE(b.defined());
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())), 0);
}

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> types = {
      DType::f32(),
      DType::f64(),
      DType{DTypeCode::Float, 16, 1},
      DType::i64(),
      DType::i32(),
      DType{DTypeCode::Int, 16, 1},
      DType::i8(),
      DType::u8(),
      DType{DTypeCode::UInt, 16, 1},
      DType{DTypeCode::UInt, 32, 1},
      DType{DTypeCode::UInt, 64, 1},
      DType{DTypeCode::Bool, 1, 1},
  };
  return types;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Npz, RoundTripEveryDtypeAndShapeStoredAndDeflated) {
  std::mt19937_64 rng(7);
  const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {7}, {3, 5}, {2, 0, 3}, {2, 3, 4, 5}};
  for (NpzCompression c : {NpzCompression::Stored, NpzCompression::Deflated}) {
    std::vector<NamedArray> arrays;
    for (DType t : all_dtypes())
      for (size_t s = 0; s < shapes.size(); ++s)
        arrays.push_back({t.str() + "_" + std::to_string(s), random_array(shapes[s], t, rng)});
    TempDir dir;
    std::string path = dir.file("a.npz");
    runtime::write_npz(path, arrays, c);
    auto back = runtime::read_npz(path);
    ASSERT_EQ(back.size(), arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i) {
      EXPECT_EQ(back[i].name, arrays[i].name);
      expect_same(arrays[i].array, back[i].array, arrays[i].name);
    }
    // The in-memory reader and writer agree with the file ones.
    std::vector<runtime::NamedArrayRef> refs;
    for (auto& a : arrays) refs.push_back({a.name, &a.array});
    std::string bytes = runtime::write_npz_memory(refs, c);
    EXPECT_EQ(bytes, read_file(path));
    auto mem = runtime::read_npz_memory(bytes.data(), bytes.size(), "mem.npz");
    ASSERT_EQ(mem.size(), arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i) expect_same(arrays[i].array, mem[i].array, "mem");
  }
}

TEST(Npz, LargeArraysRoundTripAndDeflateShrinksRedundantData) {
  std::mt19937_64 rng(11);
  std::vector<NamedArray> arrays;
  arrays.push_back({"noise", random_array({1531, 1999}, DType::f32(), rng)});  // ~12 MB
  NDArray ramp = NDArray::empty({3, 1000003}, DType::i64());
  for (int64_t i = 0; i < ramp.numel(); ++i) ramp.data_as<int64_t>()[i] = i % 1000;
  arrays.push_back({"ramp", std::move(ramp)});
  TempDir dir;
  for (NpzCompression c : {NpzCompression::Stored, NpzCompression::Deflated}) {
    std::string path = dir.file(c == NpzCompression::Stored ? "s.npz" : "d.npz");
    runtime::write_npz(path, arrays, c);
    auto back = runtime::read_npz(path);
    ASSERT_EQ(back.size(), 2u);
    expect_same(arrays[0].array, back[0].array, "noise");
    expect_same(arrays[1].array, back[1].array, "ramp");
    auto size = static_cast<int64_t>(fs::file_size(path));
    int64_t raw = arrays[0].array.nbytes() + arrays[1].array.nbytes();
    if (c == NpzCompression::Stored)
      EXPECT_GT(size, raw);
    else
      EXPECT_LT(size, arrays[0].array.nbytes() + raw / 20);
  }
}

// Checks every array of the numpy fixture against the values numpy wrote.
void check_numpy_fixture(const std::vector<NamedArray>& arrays) {
  std::map<std::string, const NDArray*> by_name;
  for (auto& a : arrays) by_name[a.name] = &a.array;
  ASSERT_EQ(by_name.size(), 9u);
  auto get = [&](const std::string& n) -> const NDArray& {
    EXPECT_TRUE(by_name.count(n)) << n;
    return *by_name.at(n);
  };
  const NDArray& f32 = get("f32");
  EXPECT_EQ(f32.dtype(), DType::f32());
  EXPECT_EQ(f32.shape(), (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(f32.data_as<float>()[i], i * 0.5f - 1);
  const NDArray& f64 = get("f64");
  EXPECT_EQ(f64.dtype(), DType::f64());
  EXPECT_EQ(f64.data_as<double>()[1], -2.25);
  EXPECT_EQ(f64.data_as<double>()[2], 1e300);
  const NDArray& i64 = get("i64");
  EXPECT_EQ(i64.dtype(), DType::i64());
  EXPECT_TRUE(i64.shape().empty());
  EXPECT_EQ(i64.numel(), 1);
  EXPECT_EQ(i64.data_as<int64_t>()[0], -7);
  const NDArray& i32 = get("i32");
  EXPECT_EQ(i32.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(i32.data_as<int32_t>()[1], -2);
  EXPECT_EQ(i32.data_as<int32_t>()[3], INT32_MIN);
  const NDArray& i16 = get("i16");
  EXPECT_EQ(i16.dtype(), (DType{DTypeCode::Int, 16, 1}));
  EXPECT_EQ(i16.data_as<int16_t>()[0], -32768);
  const NDArray& i8 = get("i8");
  EXPECT_EQ(i8.dtype(), DType::i8());
  EXPECT_EQ(i8.data_as<int8_t>()[0], -128);
  const NDArray& u8 = get("u8");
  EXPECT_EQ(u8.dtype(), DType::u8());
  EXPECT_EQ(u8.data_as<uint8_t>()[1], 255);
  const NDArray& b = get("b");
  EXPECT_EQ(b.dtype().code, DTypeCode::Bool);
  EXPECT_EQ(std::vector<uint8_t>(b.data_as<uint8_t>(), b.data_as<uint8_t>() + 3),
            (std::vector<uint8_t>{1, 0, 1}));
  const NDArray& empty = get("empty");
  EXPECT_EQ(empty.shape(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(empty.numel(), 0);
}

TEST(Npz, ReadsNumpyFilesWithStoredAndDeflatedMembers) {
  using namespace npz_fixtures;
  check_numpy_fixture(runtime::read_npz_memory(kPlain, sizeof(kPlain), "plain.npz"));
  check_numpy_fixture(runtime::read_npz_memory(kCompressed, sizeof(kCompressed), "c.npz"));
  TempDir dir;
  write_file(dir.file("c.npz"),
             std::string(reinterpret_cast<const char*>(kCompressed), sizeof(kCompressed)));
  check_numpy_fixture(runtime::read_npz(dir.file("c.npz")));
}

TEST(Npz, FortranOrderIsAClearError) {
  using namespace npz_fixtures;
  std::string e = error_of([] { runtime::read_npz_memory(kFortran, sizeof(kFortran), "f.npz"); });
  EXPECT_NE(e.find("f.npz: member 'a.npy'"), std::string::npos) << e;
  EXPECT_NE(e.find("fortran_order=True"), std::string::npos) << e;
}

// A hand-built .npy of any version and descr.
std::string make_npy(int major, const std::string& dict, const std::string& data) {
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += '\0';
  std::string header = dict + "\n";
  uint32_t n = static_cast<uint32_t>(header.size());
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + data;
}

TEST(Npz, NpyVersions2And3BigEndianAndOldStyleHeaders) {
  float v[3] = {1.0f, -2.5f, 3.25f};
  std::string le(reinterpret_cast<const char*>(v), sizeof(v));
  for (int major : {1, 2, 3}) {
    std::string npy =
        make_npy(major, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3L,)}", le);
    NDArray a = runtime::parse_npy(npy.data(), npy.size(), "x.npy");
    ASSERT_EQ(a.shape(), (std::vector<int64_t>{3}));
    EXPECT_EQ(a.data_as<float>()[1], -2.5f);
  }
  std::string be = le;
  for (size_t i = 0; i < be.size(); i += 4) std::reverse(be.begin() + i, be.begin() + i + 4);
  std::string npy = make_npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", be);
  NDArray a = runtime::parse_npy(npy.data(), npy.size(), "be.npy");
  EXPECT_EQ(std::memcmp(a.data(), v, sizeof(v)), 0);
}

TEST(Npz, SerializedNpyHasNumpysLayout) {
  NDArray a = NDArray::empty({2, 3}, DType::f32());
  std::string s = runtime::serialize_npy(a);
  ASSERT_GE(s.size(), 64u + 24u);
  EXPECT_EQ(s.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ((s.size() - 24) % 64, 0u);  // data starts 64-byte aligned
  EXPECT_NE(s.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
            std::string::npos);
  EXPECT_EQ(s[s.size() - 25], '\n');
  NDArray one = NDArray::empty({5}, DType::u8());
  EXPECT_NE(runtime::serialize_npy(one).find("'shape': (5,)"), std::string::npos);
  NDArray scalar = NDArray::empty({}, DType::i64());
  EXPECT_NE(runtime::serialize_npy(scalar).find("'shape': ()"), std::string::npos);
}

TEST(Npz, BadNpyHeadersAreErrorsNamingTheMember) {
  std::string data(12, '\0');
  auto err = [&](const std::string& npy) {
    return error_of([&] { runtime::parse_npy(npy.data(), npy.size(), "f.npz: member 'x.npy'"); });
  };
  auto has = [](const std::string& e, const std::string& part) {
    EXPECT_NE(e.find("f.npz: member 'x.npy'"), std::string::npos) << e;
    EXPECT_NE(e.find(part), std::string::npos) << e;
  };
  has(err("garbage that is not npy"), "bad magic");
  has(err(make_npy(4, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data)),
      "version 4.0");
  has(err(make_npy(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", data)),
      "unsupported dtype '<c8'");
  has(err(make_npy(1, "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", data)),
      "unsupported dtype '|O'");
  has(err(make_npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }", data)),
      "structured dtypes");
  has(err(make_npy(1, "{'descr': '<f4', 'shape': (3,), }", data)), "missing");
  has(err(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", data)),
      "truncated");
  has(err(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", data)),
      "trailing bytes");
  has(err(make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", data)),
      "fortran_order=True");
  has(err(make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (12,), }",
                   std::string(11, '\0') + "\x02")),
      "bool");
  has(err(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data)
              .substr(0, 9)),
      "truncated");
}

TEST(Npz, BadArchivesAreErrorsNamingTheFile) {
  TempDir dir;
  EXPECT_NE(
      error_of([&] { runtime::read_npz(dir.file("none.npz")); }).find("none.npz: no such file"),
      std::string::npos);
  write_file(dir.file("text.npz"), "this is not a zip archive at all");
  std::string e = error_of([&] { runtime::read_npz(dir.file("text.npz")); });
  EXPECT_NE(e.find("text.npz"), std::string::npos) << e;

  // Truncated: every cut of a numpy file is an error, never a crash or a short array.
  using namespace npz_fixtures;
  for (size_t cut : {size_t{10}, size_t{100}, sizeof(kPlain) / 2, sizeof(kPlain) - 30}) {
    write_file(dir.file("cut.npz"), std::string(reinterpret_cast<const char*>(kPlain), cut));
    e = error_of([&] { runtime::read_npz(dir.file("cut.npz")); });
    EXPECT_NE(e.find("cut.npz"), std::string::npos) << cut << ": " << e;
    for (size_t ccut : {size_t{200}, sizeof(kCompressed) / 2}) {
      e = error_of([&] { runtime::read_npz_memory(kCompressed, ccut, "cc.npz"); });
      EXPECT_NE(e.find("cc.npz"), std::string::npos) << ccut << ": " << e;
    }
  }
}

TEST(Npz, ADamagedMemberFailsItsChecksum) {
  for (NpzCompression c : {NpzCompression::Stored, NpzCompression::Deflated}) {
    std::mt19937_64 rng(5);
    NDArray a = random_array({1000}, DType::f32(), rng);
    std::string zip = runtime::write_npz_memory({{"w", &a}}, c);
    zip[zip.size() / 2] ^= 0x10;  // inside the data of the one member
    std::string e = error_of([&] { runtime::read_npz_memory(zip.data(), zip.size(), "d.npz"); });
    EXPECT_EQ(e.rfind("d.npz: member 'w.npy': ", 0), 0u) << e;
    EXPECT_NE(e.find("CRC"), std::string::npos) << e;
  }
}

TEST(Npz, FailedWriteLeavesNoFileAndKeepsTheOldOne) {
  TempDir dir;
  std::vector<NamedArray> dup;
  dup.push_back({"a", NDArray::empty({2}, DType::f32())});
  dup.push_back({"a", NDArray::empty({2}, DType::f32())});
  std::string path = dir.file("out.npz");
  std::string e = error_of([&] { runtime::write_npz(path, dup); });
  EXPECT_NE(e.find("duplicate array name 'a'"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path())) << "a temporary file was left behind";

  write_file(path, "old contents");
  EXPECT_THROW(runtime::write_npz(path, dup), std::runtime_error);
  EXPECT_EQ(read_file(path), "old contents");

  // A dtype .npy cannot hold (a vector type) writes nothing.
  std::vector<NamedArray> vec;
  vec.push_back({"v", NDArray::empty({2}, DType{DTypeCode::Float, 32, 4})});
  EXPECT_THROW(runtime::write_npz(dir.file("vec.npz"), vec), std::exception);
  EXPECT_FALSE(fs::exists(dir.file("vec.npz")));

  e = error_of([&] { runtime::write_npz(dir.file("no/such/dir/x.npz"), dup); });
  EXPECT_NE(e.find("no/such/dir/x.npz"), std::string::npos) << e;
}

// bfloat16 (kiln's packed bf16 weights in mod.params) is written as two raw
// bytes, descr |V2 (numpy has no bfloat16), and read back as bfloat16.
TEST(Npz, Bfloat16RoundTripsAsV2) {
  TempDir dir;
  NDArray a = NDArray::empty({3}, DType{DTypeCode::BFloat, 16, 1});
  const uint16_t bits[3] = {0x3f80, 0xc000, 0x7fc0};
  std::memcpy(a.data(), bits, sizeof(bits));
  std::vector<NamedArray> arrays;
  arrays.push_back({"w", std::move(a)});
  runtime::write_npz(dir.file("bf16.npz"), arrays);
  auto back = runtime::read_npz(dir.file("bf16.npz"));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].array.dtype(), (DType{DTypeCode::BFloat, 16, 1}));
  ASSERT_EQ(back[0].array.shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(std::memcmp(back[0].array.data(), bits, sizeof(bits)), 0);
}

TEST(Npz, MembersWithoutTheNpySuffixAreReadAsNpy) {
  // Members renamed in place (local and central headers): "xx.npy" -> "xx.npz"
  // is an array "xx.npz"; "yy.npy" + "yy.np_" renamed onto "yy" clashes.
  NDArray a = NDArray::empty({1}, DType::u8());
  a.data_as<uint8_t>()[0] = 3;
  std::string zip = runtime::write_npz_memory({{"xx", &a}});
  for (size_t p = zip.find("xx.npy"); p != std::string::npos; p = zip.find("xx.npy", p + 1))
    zip[p + 5] = 'z';
  auto arrays = runtime::read_npz_memory(zip.data(), zip.size(), "m.npz");
  ASSERT_EQ(arrays.size(), 1u);
  EXPECT_EQ(arrays[0].name, "xx.npz");
  EXPECT_EQ(arrays[0].array.data_as<uint8_t>()[0], 3);

  // Content that is not .npy is an error naming the member.
  std::string text = runtime::write_npz_memory({{"txt", &a}});
  size_t data = text.find("\x93NUMPY");
  ASSERT_NE(data, std::string::npos);
  text[data + 1] = 'X';
  std::string e = error_of([&] { runtime::read_npz_memory(text.data(), text.size(), "t.npz"); });
  EXPECT_NE(e.find("t.npz: member 'txt.npy'"), std::string::npos) << e;
}

// Issue 65 #11: names are bytes, as numpy stores them. libarchive lost a UTF-8 name in the C
// locale ("member '': empty array name") and read "a\\b" as "a/b" (which then clashed).
TEST(Npz, MemberNamesAreTheStoredBytes) {
  using namespace npz_fixtures;
  const std::string e_acute = "\xc3\xa9";
  auto check = [&](const std::vector<NamedArray>& arrays) {
    std::map<std::string, int> got;
    for (const auto& a : arrays) got[a.name] = a.array.data_as<uint8_t>()[0];
    EXPECT_EQ(got, (std::map<std::string, int>{{e_acute, 1}, {"a\\b", 2}, {"a/b", 3}}));
  };
  check(runtime::read_npz_memory(kNames, sizeof(kNames), "names.npz"));
  TempDir dir;
  write_file(dir.file("names.npz"),
             std::string(reinterpret_cast<const char*>(kNames), sizeof(kNames)));
  check(runtime::read_npz(dir.file("names.npz")));

  // Written back the same: the UTF-8 name flagged as UTF-8 (bit 11 of the local header's
  // flags; numpy decodes an unflagged name as cp437), the backslash kept.
  NDArray one = NDArray::empty({1}, DType::u8()), two = NDArray::empty({1}, DType::u8()),
          three = NDArray::empty({1}, DType::u8());
  one.data_as<uint8_t>()[0] = 1;
  two.data_as<uint8_t>()[0] = 2;
  three.data_as<uint8_t>()[0] = 3;
  const std::string zip =
      runtime::write_npz_memory({{e_acute, &one}, {"a\\b", &two}, {"a/b", &three}});
  ASSERT_GT(zip.size(), 8u);
  EXPECT_TRUE(static_cast<unsigned char>(zip[7]) & 0x08) << "no UTF-8 flag on '" << e_acute << "'";
  check(runtime::read_npz_memory(zip.data(), zip.size(), "back.npz"));
  runtime::write_npz(dir.file("back.npz"), {{e_acute, &one}, {"a\\b", &two}, {"a/b", &three}});
  check(runtime::read_npz(dir.file("back.npz")));
}

}  // namespace
}  // namespace kiln::test
