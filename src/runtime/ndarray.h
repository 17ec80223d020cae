// A dense tensor owned by the runtime (no compiler headers), 64-byte aligned and
// placed within a page as every buffer a kernel sees (runtime/buffer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime {

enum class DTypeCode : uint8_t { Int, UInt, Float, BFloat, Bool };

// Element type: "float32", "int8", "uint8", "bfloat16", "bool", "float32x4".
struct DType {
  DTypeCode code = DTypeCode::Float;
  uint8_t bits = 32;
  uint16_t lanes = 1;

  static constexpr DType f32() { return {DTypeCode::Float, 32, 1}; }
  static constexpr DType f64() { return {DTypeCode::Float, 64, 1}; }
  static constexpr DType i32() { return {DTypeCode::Int, 32, 1}; }
  static constexpr DType i64() { return {DTypeCode::Int, 64, 1}; }
  static constexpr DType i8() { return {DTypeCode::Int, 8, 1}; }
  static constexpr DType u8() { return {DTypeCode::UInt, 8, 1}; }

  // Bytes per element (all lanes); bool takes one byte.
  int64_t bytes() const { return static_cast<int64_t>(bits < 8 ? 1 : bits / 8) * lanes; }
  std::string str() const;
  // Parses what str() prints; throws std::invalid_argument otherwise.
  static DType parse(const std::string& s);

  bool operator==(const DType& o) const {
    return code == o.code && bits == o.bits && lanes == o.lanes;
  }
  bool operator!=(const DType& o) const { return !(*this == o); }
};

class NDArray {
 public:
  NDArray() = default;
  NDArray(NDArray&&) noexcept = default;
  NDArray& operator=(NDArray&&) noexcept = default;
  // Copies are explicit (copy()): tensors can be large.
  NDArray(const NDArray&) = delete;
  NDArray& operator=(const NDArray&) = delete;

  // Uninitialized memory for shape (row-major), placed by allocate_buffer. Throws
  // std::invalid_argument on a negative dimension, std::bad_alloc when out of memory.
  static NDArray empty(std::vector<int64_t> shape, DType dtype);
  NDArray copy() const;

  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <typename T>
  T* data_as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data());
  }

  const std::vector<int64_t>& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * dtype_.bytes(); }
  bool defined() const { return data_ != nullptr; }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  std::vector<int64_t> shape_;
  DType dtype_;
};

}  // namespace kiln::runtime
