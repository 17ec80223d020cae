#include "runtime/ndarray.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "runtime/buffer.h"

namespace kiln::runtime {

namespace {

const char* code_name(DTypeCode c) {
  switch (c) {
    case DTypeCode::Int: return "int";
    case DTypeCode::UInt: return "uint";
    case DTypeCode::Float: return "float";
    case DTypeCode::BFloat: return "bfloat";
    case DTypeCode::Bool: return "bool";
  }
  return "?";
}

bool valid(DTypeCode c, int bits) {
  switch (c) {
    case DTypeCode::Int:
    case DTypeCode::UInt: return bits == 8 || bits == 16 || bits == 32 || bits == 64;
    case DTypeCode::Float: return bits == 16 || bits == 32 || bits == 64;
    case DTypeCode::BFloat: return bits == 16;
    case DTypeCode::Bool: return bits == 1;
  }
  return false;
}

}  // namespace

std::string DType::str() const {
  std::string s = code == DTypeCode::Bool ? "bool" : code_name(code) + std::to_string(bits);
  if (lanes > 1) s += "x" + std::to_string(lanes);
  return s;
}

DType DType::parse(const std::string& s) {
  auto bad = [&] { return std::invalid_argument("bad dtype \"" + s + "\""); };
  std::string base = s;
  int lanes = 1;
  if (auto x = s.find('x'); x != std::string::npos) {
    base = s.substr(0, x);
    std::string l = s.substr(x + 1);
    if (l.empty() || l.size() > 5 || l.find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    lanes = std::stoi(l);
    if (lanes < 1 || lanes > 65535) throw bad();
  }
  DType t;
  t.lanes = static_cast<uint16_t>(lanes);
  if (base == "bool") {
    t.code = DTypeCode::Bool, t.bits = 1;
    return t;
  }
  for (DTypeCode c : {DTypeCode::UInt, DTypeCode::Int, DTypeCode::BFloat, DTypeCode::Float}) {
    std::string name = code_name(c);
    if (base.compare(0, name.size(), name) != 0) continue;
    std::string digits = base.substr(name.size());
    if (digits.empty() || digits.size() > 2 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    int bits = std::stoi(digits);
    if (!valid(c, bits)) throw bad();
    t.code = c, t.bits = static_cast<uint8_t>(bits);
    return t;
  }
  throw bad();
}

void NDArray::Free::operator()(void* p) const { free_buffer(p); }

int64_t NDArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

NDArray NDArray::empty(std::vector<int64_t> shape, DType dtype) {
  NDArray a;
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("NDArray::empty: negative dimension");
  a.shape_ = std::move(shape);
  a.dtype_ = dtype;
  // Placed as every buffer a kernel sees (runtime/buffer.h).
  a.data_.reset(allocate_buffer(static_cast<size_t>(a.nbytes())));
  return a;
}

NDArray NDArray::copy() const {
  if (!defined()) return NDArray();
  NDArray c = empty(shape_, dtype_);
  std::memcpy(c.data(), data(), static_cast<size_t>(nbytes()));
  return c;
}

}  // namespace kiln::runtime
