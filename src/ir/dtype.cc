#include "ir/dtype.h"

#include <stdexcept>

namespace kiln::ir {

std::string DataType::str() const {
  std::string s;
  switch (code) {
    case TypeCode::Int: s = "int" + std::to_string(bits); break;
    case TypeCode::UInt: s = "uint" + std::to_string(bits); break;
    case TypeCode::Float: s = "float" + std::to_string(bits); break;
    case TypeCode::BFloat: s = "bfloat" + std::to_string(bits); break;
    case TypeCode::Bool: s = "bool"; break;
    case TypeCode::Handle: return "handle";
  }
  if (lanes > 1) s += "x" + std::to_string(lanes);
  return s;
}

DataType DataType::parse(const std::string& text) {
  auto fail = [&]() -> DataType {
    throw std::invalid_argument("unknown data type '" + text + "'");
  };
  if (text == "handle") return handle();
  std::string s = text;
  int lanes = 1;
  if (auto x = s.find('x'); x != std::string::npos) {
    try {
      lanes = std::stoi(s.substr(x + 1));
    } catch (...) {
      return fail();
    }
    s = s.substr(0, x);
  }
  if (s == "bool") return boolean(lanes);
  struct Prefix {
    const char* name;
    TypeCode code;
  };
  for (Prefix p : {Prefix{"uint", TypeCode::UInt}, Prefix{"int", TypeCode::Int},
                   Prefix{"bfloat", TypeCode::BFloat}, Prefix{"float", TypeCode::Float}}) {
    std::string name = p.name;
    if (s.rfind(name, 0) == 0) {
      int bits = 0;
      try {
        bits = std::stoi(s.substr(name.size()));
      } catch (...) {
        return fail();
      }
      if (bits != 8 && bits != 16 && bits != 32 && bits != 64) return fail();
      return DataType(p.code, bits, lanes);
    }
  }
  return fail();
}

}  // namespace kiln::ir
