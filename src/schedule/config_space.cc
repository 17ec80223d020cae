#include "schedule/config_space.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace kiln::schedule {

namespace detail {

// One knob and its candidate list; only the vector matching `kind` is used.
struct Knob {
  Knob(std::string n, KnobKind k) : name(std::move(n)), kind(k) {}

  std::string name;
  KnobKind kind;
  std::vector<std::vector<int64_t>> splits;
  std::vector<int64_t> values;
  std::vector<std::vector<int>> orders;
  std::vector<std::vector<Annotation>> annotations;
  // A knob added to a template after configs were stored: config JSON that
  // lacks it takes its first candidate, the behaviour from before it existed.
  bool first_when_absent = false;

  int64_t size() const {
    switch (kind) {
      case KnobKind::Split: return static_cast<int64_t>(splits.size());
      case KnobKind::Knob: return static_cast<int64_t>(values.size());
      case KnobKind::Reorder: return static_cast<int64_t>(orders.size());
      case KnobKind::Annotate: return static_cast<int64_t>(annotations.size());
    }
    return 0;
  }
};

struct SpaceData {
  std::vector<Knob> knobs;
  std::vector<std::string> names;
  std::unordered_map<std::string, size_t> by_name;
  int64_t size = 1;
};

}  // namespace detail

using detail::Knob;
using detail::SpaceData;

namespace {

// A guard against definitions whose enumeration would exhaust memory.
constexpr size_t kMaxCandidates = size_t{1} << 22;
constexpr int kMaxReorderAxes = 8;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

[[noreturn]] void fail_define(const std::string& name, const std::string& why) {
  throw std::invalid_argument("config space: knob " + quoted(name) + ": " + why);
}

template <typename T>
std::string list_to_string(const std::vector<T>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
  return os.str();
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t d = 1; d <= n / d; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

std::vector<int64_t> powers_of_two_upto(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t p = 1; p <= n; p *= 2) {
    out.push_back(p);
    if (p > n / 2) break;  // the next doubling would pass n (or overflow)
  }
  return out;
}

// SplitPolicy::RegisterTile's small counts: 1 .. this.
constexpr int64_t kMaxRegisterTileCount = 8;

// Ascending candidate values for each inner factor f1..f_{n-1}.
std::vector<int64_t> inner_factor_candidates(int64_t extent, SplitPolicy policy,
                                             int64_t max_factor) {
  std::vector<int64_t> c;
  if (policy != SplitPolicy::Power2) c = divisors(extent);
  if (policy != SplitPolicy::Factors) {
    std::vector<int64_t> p2 = powers_of_two_upto(extent), merged;
    if (policy == SplitPolicy::RegisterTile) {
      for (int64_t f = 3; f <= std::min<int64_t>(extent, kMaxRegisterTileCount); ++f)
        p2.push_back(f);
      std::sort(p2.begin(), p2.end());
      p2.erase(std::unique(p2.begin(), p2.end()), p2.end());
    }
    std::set_union(c.begin(), c.end(), p2.begin(), p2.end(), std::back_inserter(merged));
    c = std::move(merged);
  }
  if (max_factor > 0) std::erase_if(c, [&](int64_t f) { return f > max_factor; });
  return c;
}

struct SplitEnumeration {
  const std::string& name;
  int64_t extent;
  bool exact;  // Factors: the inner product must divide the extent
  const std::vector<int64_t>& factors;
  const SplitFilter& filter;
  std::vector<std::vector<int64_t>> out;

  // Chooses inner factors left to right (f1 first), so the output is in
  // lexicographic order of (f1, ..., f_{n-1}); `product` is that of tuple[1..].
  void run(std::vector<int64_t>& tuple, size_t pos, int64_t product) {
    if (pos == tuple.size()) return emit(tuple, product);
    for (int64_t f : factors) {
      if (f > extent / product) break;  // product * f > extent, and f ascends
      if (exact && (extent / product) % f != 0) continue;
      tuple[pos] = f;
      run(tuple, pos + 1, product * f);
    }
  }

  void emit(std::vector<int64_t>& tuple, int64_t product) {
    tuple[0] = (extent + product - 1) / product;  // exact division under Factors
    if (filter && !filter(tuple)) return;
    if (out.size() >= kMaxCandidates) fail_define(name, "too many split candidates");
    out.push_back(tuple);
  }
};

std::vector<std::vector<Annotation>> annotation_candidates(int num_axes, AnnotatePolicy policy) {
  using A = Annotation;
  std::vector<A> inner_opts{A::None}, last_opts{A::None};
  if (policy == AnnotatePolicy::TryUnroll || policy == AnnotatePolicy::TryUnrollVec) {
    inner_opts.push_back(A::Unroll);
    last_opts.push_back(A::Unroll);
  }
  if (policy == AnnotatePolicy::TryVec || policy == AnnotatePolicy::TryUnrollVec)
    last_opts.push_back(A::Vectorize);
  // Odometer with the last axis fastest: lexicographic, first axis significant.
  std::vector<std::vector<Annotation>> out;
  std::vector<size_t> digit(num_axes, 0);
  auto options = [&](int axis) -> const std::vector<A>& {
    return axis == num_axes - 1 ? last_opts : inner_opts;
  };
  while (true) {
    std::vector<A> value(num_axes);
    for (int a = 0; a < num_axes; ++a) value[a] = options(a)[digit[a]];
    out.push_back(std::move(value));
    int a = num_axes - 1;
    while (a >= 0 && ++digit[a] == options(a).size()) digit[a--] = 0;
    if (a < 0) return out;
  }
}

bool is_permutation_of_iota(const std::vector<int>& perm, int n) {
  if (static_cast<int>(perm.size()) != n) return false;
  std::vector<bool> seen(n, false);
  for (int p : perm) {
    if (p < 0 || p >= n || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}

}  // namespace

const char* annotation_name(Annotation a) {
  switch (a) {
    case Annotation::None: return "none";
    case Annotation::Unroll: return "unroll";
    case Annotation::Vectorize: return "vec";
  }
  return "?";
}

const char* knob_kind_name(KnobKind k) {
  switch (k) {
    case KnobKind::Split: return "split";
    case KnobKind::Knob: return "knob";
    case KnobKind::Reorder: return "reorder";
    case KnobKind::Annotate: return "annotate";
  }
  return "?";
}

// ---- ConfigSpace: definitions ---------------------------------------------

ConfigSpace::ConfigSpace() : data_(std::make_shared<SpaceData>()) {}

void ConfigSpace::add_knob(Knob&& knob) {
  const std::string& name = knob.name;
  if (name.empty()) fail_define(name, "empty name");
  if (data_->by_name.count(name)) fail_define(name, "defined twice");
  const int64_t n = knob.size();
  if (n == 0) fail_define(name, "no candidates (all filtered out?)");
  if (data_->size > std::numeric_limits<int64_t>::max() / n)
    throw std::overflow_error("config space: size overflows int64 at knob " + quoted(name));
  // Copy on write: Configs made so far keep sharing the old snapshot.
  if (data_.use_count() > 1) data_ = std::make_shared<SpaceData>(*data_);
  data_->size *= n;
  data_->by_name.emplace(name, data_->knobs.size());
  data_->names.push_back(name);
  data_->knobs.push_back(std::move(knob));
}

void ConfigSpace::define_split(const std::string& name, int64_t extent, int num_outputs,
                               SplitPolicy policy, int64_t max_factor, const SplitFilter& filter) {
  if (extent < 1) fail_define(name, "split extent must be >= 1, got " + std::to_string(extent));
  if (num_outputs < 1)
    fail_define(name, "split needs >= 1 output, got " + std::to_string(num_outputs));
  if (max_factor < 0) fail_define(name, "max_factor must be >= 0 (0 = no bound)");
  const std::vector<int64_t> factors = inner_factor_candidates(extent, policy, max_factor);
  SplitEnumeration e{name, extent, policy == SplitPolicy::Factors, factors, filter, {}};
  std::vector<int64_t> tuple(num_outputs, 1);
  e.run(tuple, 1, 1);
  Knob k{name, KnobKind::Split};
  k.splits = std::move(e.out);
  add_knob(std::move(k));
}

void ConfigSpace::define_knob(const std::string& name, std::vector<int64_t> candidates,
                              KnobOrigin origin) {
  std::vector<int64_t> sorted = candidates;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail_define(name, "repeated candidate in " + list_to_string(candidates));
  Knob k{name, KnobKind::Knob};
  k.values = std::move(candidates);
  k.first_when_absent = origin == KnobOrigin::AddedLater;
  add_knob(std::move(k));
}

void ConfigSpace::define_reorder(const std::string& name, int num_axes, ReorderPolicy policy) {
  if (num_axes < 1) fail_define(name, "reorder needs >= 1 axis");
  if (policy == ReorderPolicy::All && num_axes > kMaxReorderAxes)
    fail_define(name, "ReorderPolicy::All is limited to " + std::to_string(kMaxReorderAxes) +
                          " axes; pass explicit candidates");
  std::vector<int> perm(num_axes);
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<std::vector<int>> orders;
  do {
    orders.push_back(perm);
  } while (policy == ReorderPolicy::All && std::next_permutation(perm.begin(), perm.end()));
  define_reorder(name, num_axes, std::move(orders));
}

void ConfigSpace::define_reorder(const std::string& name, int num_axes,
                                 std::vector<std::vector<int>> candidates) {
  if (num_axes < 1) fail_define(name, "reorder needs >= 1 axis");
  for (const auto& perm : candidates)
    if (!is_permutation_of_iota(perm, num_axes))
      fail_define(name, list_to_string(perm) + " is not a permutation of 0.." +
                            std::to_string(num_axes - 1));
  std::vector<std::vector<int>> sorted = candidates;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail_define(name, "repeated permutation");
  Knob k{name, KnobKind::Reorder};
  k.orders = std::move(candidates);
  add_knob(std::move(k));
}

void ConfigSpace::define_annotate(const std::string& name, int num_axes, AnnotatePolicy policy) {
  if (num_axes < 1) fail_define(name, "annotate needs >= 1 axis");
  if (num_axes > 20) fail_define(name, "annotate is limited to 20 axes");
  Knob k{name, KnobKind::Annotate};
  k.annotations = annotation_candidates(num_axes, policy);
  add_knob(std::move(k));
}

// ---- ConfigSpace: queries ---------------------------------------------------

int64_t ConfigSpace::size() const { return data_->size; }

const std::vector<std::string>& ConfigSpace::knob_names() const { return data_->names; }

std::vector<int64_t> ConfigSpace::knob_sizes() const {
  std::vector<int64_t> sizes;
  for (const Knob& k : data_->knobs) sizes.push_back(k.size());
  return sizes;
}

KnobKind ConfigSpace::knob_kind(const std::string& name) const {
  auto it = data_->by_name.find(name);
  if (it == data_->by_name.end())
    throw std::out_of_range("config space has no knob " + quoted(name));
  return data_->knobs[it->second].kind;
}

Config ConfigSpace::get(int64_t index) const {
  if (index < 0 || index >= data_->size)
    throw std::out_of_range("config index " + std::to_string(index) + " outside [0, " +
                            std::to_string(data_->size) + ")");
  std::vector<int64_t> choices;
  int64_t rest = index;
  for (const Knob& k : data_->knobs) {  // first knob fastest
    choices.push_back(rest % k.size());
    rest /= k.size();
  }
  return Config(data_, std::move(choices), index);
}

Config ConfigSpace::from_choices(const std::vector<int64_t>& choices) const {
  const auto& knobs = data_->knobs;
  if (choices.size() != knobs.size())
    throw std::invalid_argument("config space: " + std::to_string(choices.size()) +
                                " choices for " + std::to_string(knobs.size()) + " knobs");
  int64_t index = 0, stride = 1;
  for (size_t i = 0; i < knobs.size(); ++i) {
    if (choices[i] < 0 || choices[i] >= knobs[i].size())
      throw std::out_of_range("config space: choice " + std::to_string(choices[i]) +
                              " outside knob " + quoted(knobs[i].name) + " of size " +
                              std::to_string(knobs[i].size()));
    index += choices[i] * stride;  // cannot overflow: index < size() <= int64 max
    if (i + 1 < knobs.size()) stride *= knobs[i].size();
  }
  return Config(data_, choices, index);
}

Config ConfigSpace::random(std::mt19937_64& rng) const {
  std::uniform_int_distribution<int64_t> pick(0, data_->size - 1);
  return get(pick(rng));
}

// ---- Config -----------------------------------------------------------------

Config::Config() : space_(std::make_shared<SpaceData>()) {}

Config::Config(std::shared_ptr<const SpaceData> space, std::vector<int64_t> choices, int64_t index)
    : space_(std::move(space)), choices_(std::move(choices)), index_(index) {}

size_t Config::knob_position(const std::string& name, KnobKind kind) const {
  auto it = space_->by_name.find(name);
  if (it == space_->by_name.end()) throw std::out_of_range("config has no knob " + quoted(name));
  KnobKind actual = space_->knobs[it->second].kind;
  if (actual != kind)
    throw std::invalid_argument("knob " + quoted(name) + " is a " + knob_kind_name(actual) +
                                ", not a " + knob_kind_name(kind));
  return it->second;
}

const std::vector<int64_t>& Config::split(const std::string& name) const {
  size_t i = knob_position(name, KnobKind::Split);
  return space_->knobs[i].splits[choices_[i]];
}

int64_t Config::knob(const std::string& name) const {
  size_t i = knob_position(name, KnobKind::Knob);
  return space_->knobs[i].values[choices_[i]];
}

bool Config::has_knob(const std::string& name) const {
  return space_ && space_->by_name.count(name) > 0;
}

const std::vector<int>& Config::reorder(const std::string& name) const {
  size_t i = knob_position(name, KnobKind::Reorder);
  return space_->knobs[i].orders[choices_[i]];
}

const std::vector<Annotation>& Config::annotate(const std::string& name) const {
  size_t i = knob_position(name, KnobKind::Annotate);
  return space_->knobs[i].annotations[choices_[i]];
}

bool Config::operator==(const Config& other) const {
  return choices_ == other.choices_ && space_->names == other.space_->names;
}

// ---- JSON -------------------------------------------------------------------

namespace {

// The chosen value of knob `k` at candidate position `c`, as JSON text.
std::string value_json(const Knob& k, int64_t c) {
  switch (k.kind) {
    case KnobKind::Split: return list_to_string(k.splits[c]);
    case KnobKind::Knob: return std::to_string(k.values[c]);
    case KnobKind::Reorder: return list_to_string(k.orders[c]);
    case KnobKind::Annotate: {
      std::vector<std::string> names;
      for (Annotation a : k.annotations[c])
        names.push_back('"' + std::string(annotation_name(a)) + '"');
      return list_to_string(names);
    }
  }
  return "null";
}

using Json = nlohmann::json;

[[noreturn]] void fail_value(const std::string& name, const Json& v, const std::string& why) {
  throw std::invalid_argument("config JSON: knob " + quoted(name) + " value " + v.dump() + " " +
                              why);
}

int64_t as_int64(const std::string& name, const Json& v) {
  if (!v.is_number_integer()) fail_value(name, v, "is not an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    fail_value(name, v, "is out of range");
  return v.get<int64_t>();
}

std::vector<int64_t> as_int_list(const std::string& name, const Json& v) {
  if (!v.is_array()) fail_value(name, v, "is not an array of integers");
  std::vector<int64_t> out;
  for (const Json& e : v) out.push_back(as_int64(name, e));
  return out;
}

std::vector<Annotation> as_annotations(const std::string& name, const Json& v) {
  if (!v.is_array()) fail_value(name, v, "is not an array of annotations");
  std::vector<Annotation> out;
  for (const Json& e : v) {
    Annotation found = Annotation::None;
    bool ok = false;
    for (Annotation a : {Annotation::None, Annotation::Unroll, Annotation::Vectorize})
      if (e.is_string() && e.get<std::string>() == annotation_name(a)) found = a, ok = true;
    if (!ok) fail_value(name, v, "has an annotation other than \"none\", \"unroll\", \"vec\"");
    out.push_back(found);
  }
  return out;
}

template <typename T>
int64_t position_of(const std::vector<T>& candidates, const T& value) {
  auto it = std::find(candidates.begin(), candidates.end(), value);
  return it == candidates.end() ? -1 : static_cast<int64_t>(it - candidates.begin());
}

// The candidate position of a JSON value for knob `k`; throws if it is none.
int64_t parse_choice(const Knob& k, const Json& v) {
  int64_t c = -1;
  switch (k.kind) {
    case KnobKind::Split: c = position_of(k.splits, as_int_list(k.name, v)); break;
    case KnobKind::Knob: c = position_of(k.values, as_int64(k.name, v)); break;
    case KnobKind::Reorder: {
      std::vector<int64_t> wide = as_int_list(k.name, v);
      std::vector<int> perm(wide.begin(), wide.end());
      bool fits = std::all_of(wide.begin(), wide.end(), [](int64_t x) { return x == int(x); });
      c = fits ? position_of(k.orders, perm) : -1;
      break;
    }
    case KnobKind::Annotate: c = position_of(k.annotations, as_annotations(k.name, v)); break;
  }
  if (c < 0)
    fail_value(k.name, v, std::string("is not a candidate of this ") + knob_kind_name(k.kind));
  return c;
}

}  // namespace

std::string Config::to_json() const {
  std::ostringstream os;
  os << "{\"index\": " << index_ << ", \"knobs\": {";
  for (size_t i = 0; i < space_->knobs.size(); ++i) {
    const Knob& k = space_->knobs[i];
    os << (i ? ", " : "") << Json(k.name).dump() << ": " << value_json(k, choices_[i]);
  }
  os << "}}";
  return os.str();
}

Config Config::from_json(const ConfigSpace& space, const std::string& text) {
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {
    throw std::invalid_argument(std::string("config JSON: cannot parse: ") + e.what());
  }
  if (!root.is_object() || !root.contains("knobs") || !root["knobs"].is_object())
    throw std::invalid_argument("config JSON: expected an object with a \"knobs\" object");
  if (root.contains("index") && !root["index"].is_number_integer())
    throw std::invalid_argument("config JSON: \"index\" " + root["index"].dump() +
                                " is not an integer");
  const Json& knobs = root["knobs"];
  const SpaceData& data = *space.data_;
  for (const auto& [name, value] : knobs.items())
    if (!data.by_name.count(name))
      throw std::invalid_argument("config JSON: unknown knob " + quoted(name) + " (value " +
                                  value.dump() + ")");
  std::vector<int64_t> choices;
  for (const Knob& k : data.knobs) {
    if (!knobs.contains(k.name) && k.first_when_absent) {
      choices.push_back(0);
      continue;
    }
    if (!knobs.contains(k.name))
      throw std::invalid_argument("config JSON: missing knob " + quoted(k.name));
    choices.push_back(parse_choice(k, knobs[k.name]));
  }
  return space.from_choices(choices);
}

}  // namespace kiln::schedule
