#include "ops/workload.h"

#include <cctype>
#include <stdexcept>

namespace kiln::ops {

namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
}

// A cursor over a key; every error names the whole key and the position.
struct KeyParser {
  const std::string& text;
  size_t pos = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("workload key '" + text + "': " + what + " at position " +
                                std::to_string(pos));
  }
  void expect(char c) {
    if (pos >= text.size() || text[pos] != c) fail(std::string("expected '") + c + "'");
    ++pos;
  }
  bool accept(char c) {
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  std::string name() {
    size_t start = pos;
    while (pos < text.size() && is_name_char(text[pos])) ++pos;
    if (pos == start) fail("expected a name");
    return text.substr(start, pos - start);
  }
  int64_t integer() {
    size_t start = pos;
    if (pos < text.size() && text[pos] == '-') ++pos;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) ++pos;
    if (pos == start || text[pos - 1] == '-') fail("expected an integer");
    try {
      return std::stoll(text.substr(start, pos - start));
    } catch (const std::out_of_range&) {
      pos = start;
      fail("integer out of range");
    }
  }
  std::vector<int64_t> list() {
    std::vector<int64_t> v;
    expect('[');
    if (accept(']')) return v;
    do v.push_back(integer());
    while (accept(','));
    expect(']');
    return v;
  }
};

}  // namespace

std::string Workload::key() const {
  std::string s = template_name + "(";
  for (const auto& [name, values] : params) {
    s += name + "=[";
    for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + std::to_string(values[i]);
    s += "],";
  }
  return s + "dtype=" + dtype + ")";
}

Workload Workload::parse(const std::string& key) {
  KeyParser p{key};
  Workload w;
  w.template_name = p.name();
  p.expect('(');
  for (;;) {
    std::string name = p.name();
    p.expect('=');
    if (name == "dtype") {
      w.dtype = p.name();
      break;
    }
    for (auto& [seen, values] : w.params)
      if (seen == name) p.fail("parameter '" + name + "' given twice");
    w.params.emplace_back(name, p.list());
    p.expect(',');
  }
  p.expect(')');
  if (p.pos != key.size()) p.fail("trailing text");
  return w;
}

const std::vector<int64_t>& Workload::get(const std::string& name) const {
  for (const auto& [n, values] : params)
    if (n == name) return values;
  throw std::invalid_argument("workload " + key() + " has no parameter '" + name + "'");
}

}  // namespace kiln::ops
