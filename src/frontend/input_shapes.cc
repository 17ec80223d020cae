// --input-shapes parsing. Kept apart from onnx_import.cc: it needs no ONNX.
#include <cctype>
#include <charconv>

#include "frontend/onnx_import.h"

namespace kiln::frontend {
namespace {

[[noreturn]] void fail(const std::string& text, const std::string& why) {
  throw ImportError("--input-shapes \"" + text + "\": " + why +
                    " (expected name:[d0,d1,...],name2:[...])");
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// "1, 3,224" -> {1, 3, 224}; "" -> {} (a scalar input).
std::vector<int64_t> parse_dims(const std::string& text, const std::string& name,
                                std::string_view body) {
  std::vector<int64_t> dims;
  if (trim(body).empty()) return dims;
  size_t pos = 0;
  while (pos <= body.size()) {
    size_t comma = body.find(',', pos);
    if (comma == std::string_view::npos) comma = body.size();
    std::string item = trim(body.substr(pos, comma - pos));
    int64_t v = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0)
      fail(text, "dimension '" + item + "' of '" + name + "' is not a non-negative integer");
    dims.push_back(v);
    pos = comma + 1;
  }
  return dims;
}

}  // namespace

InputShapes parse_input_shapes(const std::string& text) {
  InputShapes shapes;
  std::string_view rest = text;
  while (!trim(rest).empty()) {
    // The name runs to the ':' that directly precedes '['; names may hold ':'.
    size_t open = rest.find('[');
    if (open == std::string_view::npos) fail(text, "missing '[' after '" + trim(rest) + "'");
    std::string head = trim(rest.substr(0, open));
    if (head.empty() || head.back() != ':') fail(text, "missing ':' before '['");
    std::string name = trim(std::string_view(head).substr(0, head.size() - 1));
    if (name.empty()) fail(text, "an input name is empty");
    size_t close = rest.find(']', open);
    if (close == std::string_view::npos) fail(text, "missing ']' for '" + name + "'");
    if (shapes.count(name)) fail(text, "input '" + name + "' is given twice");
    shapes[name] = parse_dims(text, name, rest.substr(open + 1, close - open - 1));
    rest = rest.substr(close + 1);
    std::string after = trim(rest);
    if (!after.empty() && after[0] != ',') fail(text, "expected ',' after '" + name + "'s shape");
    if (!after.empty()) rest = rest.substr(rest.find(',') + 1);
    if (!after.empty() && trim(rest).empty()) fail(text, "trailing ','");
  }
  return shapes;
}

}  // namespace kiln::frontend
