// Scalar and vector data types of kiln's IR.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::ir {

enum class TypeCode : uint8_t { Int, UInt, Float, BFloat, Bool, Handle };

// A data type: a scalar kind, its width in bits, and a number of vector lanes.
// `float32x16` is {Float, 32, 16}. Handles are opaque pointers (buffer data).
struct DataType {
  TypeCode code = TypeCode::Float;
  uint8_t bits = 32;
  uint16_t lanes = 1;

  constexpr DataType() = default;
  constexpr DataType(TypeCode c, int b, int l = 1)
      : code(c), bits(static_cast<uint8_t>(b)), lanes(static_cast<uint16_t>(l)) {}

  static constexpr DataType f32(int lanes = 1) { return {TypeCode::Float, 32, lanes}; }
  static constexpr DataType f16(int lanes = 1) { return {TypeCode::Float, 16, lanes}; }
  static constexpr DataType bf16(int lanes = 1) { return {TypeCode::BFloat, 16, lanes}; }
  static constexpr DataType f64(int lanes = 1) { return {TypeCode::Float, 64, lanes}; }
  static constexpr DataType i8(int lanes = 1) { return {TypeCode::Int, 8, lanes}; }
  static constexpr DataType u8(int lanes = 1) { return {TypeCode::UInt, 8, lanes}; }
  static constexpr DataType i16(int lanes = 1) { return {TypeCode::Int, 16, lanes}; }
  static constexpr DataType i32(int lanes = 1) { return {TypeCode::Int, 32, lanes}; }
  static constexpr DataType i64(int lanes = 1) { return {TypeCode::Int, 64, lanes}; }
  static constexpr DataType boolean(int lanes = 1) { return {TypeCode::Bool, 1, lanes}; }
  static constexpr DataType handle() { return {TypeCode::Handle, 64, 1}; }

  constexpr bool is_float() const { return code == TypeCode::Float || code == TypeCode::BFloat; }
  constexpr bool is_int() const { return code == TypeCode::Int; }
  constexpr bool is_uint() const { return code == TypeCode::UInt; }
  // Int or UInt (not Bool): types on which integer arithmetic is defined.
  constexpr bool is_integer() const { return is_int() || is_uint(); }
  constexpr bool is_bool() const { return code == TypeCode::Bool; }
  constexpr bool is_handle() const { return code == TypeCode::Handle; }
  constexpr bool is_scalar() const { return lanes == 1; }
  constexpr bool is_vector() const { return lanes > 1; }

  constexpr DataType with_lanes(int l) const { return {code, bits, l}; }
  constexpr DataType element_of() const { return with_lanes(1); }
  // Storage size of one element in bytes (bool is stored as one byte).
  constexpr int bytes() const { return bits < 8 ? 1 : bits / 8; }

  constexpr bool operator==(const DataType& o) const {
    return code == o.code && bits == o.bits && lanes == o.lanes;
  }
  constexpr bool operator!=(const DataType& o) const { return !(*this == o); }

  // "float32", "int64x8", "bool", "handle".
  std::string str() const;
  // Parses the form str() prints; throws std::invalid_argument on anything else.
  static DataType parse(const std::string& s);
};

}  // namespace kiln::ir
