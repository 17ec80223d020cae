#include "schedule/config_space.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::schedule {
namespace {

using Tuples = std::vector<std::vector<int64_t>>;

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

// All candidates of a single split knob, in order.
Tuples split_candidates(const ConfigSpace& s, const std::string& name) {
  Tuples out;
  for (int64_t i = 0; i < s.size(); ++i) out.push_back(s.get(i).split(name));
  return out;
}

// Expects `fn` to throw E with a message containing every one of `parts`.
template <typename E, typename Fn>
void expect_throw_naming(Fn fn, std::vector<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << e.what() << "' lacks '" << p << "'";
  }
}

// A mixed space used by several tests: 28 * 4 * 6 * 12 * 2 configs.
ConfigSpace mixed_space() {
  ConfigSpace s;
  s.define_split("tile_x", 64, 3);
  s.define_split("tile_y", 7, 2, SplitPolicy::All);
  s.define_reorder("order", 3);
  s.define_annotate("ann", 3, AnnotatePolicy::TryUnrollVec);
  s.define_knob("unroll", {0, 16});
  return s;
}

TEST(ConfigSpace, EmptySpaceHasOnePoint) {
  ConfigSpace s;
  EXPECT_EQ(s.size(), 1);
  EXPECT_EQ(s.get(0).index(), 0);
  EXPECT_EQ(s.get(0).to_json(), R"({"index": 0, "knobs": {}})");
}

TEST(ConfigSpace, HasKnobNamesEveryKindOfKnob) {
  Config c = mixed_space().get(5);
  for (const char* name : {"tile_x", "tile_y", "order", "ann", "unroll"})
    EXPECT_TRUE(c.has_knob(name)) << name;
  EXPECT_FALSE(c.has_knob("c_vec"));
  EXPECT_FALSE(Config().has_knob("unroll"));
}

TEST(ConfigSpace, FactorsSplitOf64IntoThree) {
  ConfigSpace s;
  s.define_split("t", 64, 3, SplitPolicy::Factors);
  EXPECT_EQ(s.size(), 28);  // C(6 + 2, 2) ordered triples with product 2^6
  std::set<std::vector<int64_t>> seen;
  for (const auto& t : split_candidates(s, "t")) {
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(product(t), 64);
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 28u);
}

TEST(ConfigSpace, FactorsSplitCountsByFormula) {
  // 360 = 2^3 3^2 5: ordered n-tuples = prod_p C(e_p + n - 1, n - 1).
  ConfigSpace s2, s3;
  s2.define_split("t", 360, 2);
  s3.define_split("t", 360, 3);
  EXPECT_EQ(s2.size(), 4 * 3 * 2);
  EXPECT_EQ(s3.size(), 10 * 6 * 3);
  ConfigSpace one;
  one.define_split("t", 1, 4);
  EXPECT_EQ(one.size(), 1);
  EXPECT_EQ(one.get(0).split("t"), (std::vector<int64_t>{1, 1, 1, 1}));
}

TEST(ConfigSpace, PrimeExtent) {
  ConfigSpace s;
  s.define_split("t", 13, 3);
  EXPECT_EQ(split_candidates(s, "t"), (Tuples{{13, 1, 1}, {1, 1, 13}, {1, 13, 1}}));
}

TEST(ConfigSpace, OrderIsLexicographicByInnerFactors) {
  ConfigSpace s;
  s.define_split("t", 12, 2);
  EXPECT_EQ(split_candidates(s, "t"), (Tuples{{12, 1}, {6, 2}, {4, 3}, {3, 4}, {2, 6}, {1, 12}}));
}

TEST(ConfigSpace, AllPolicyOnPrimeExtentDerivesOuterByCeil) {
  ConfigSpace s;
  s.define_split("t", 7, 2, SplitPolicy::All);  // inner from {1, 7} U {1, 2, 4}
  EXPECT_EQ(split_candidates(s, "t"), (Tuples{{7, 1}, {4, 2}, {2, 4}, {1, 7}}));
  ConfigSpace f;
  f.define_split("t", 7, 2, SplitPolicy::Factors);
  EXPECT_EQ(split_candidates(f, "t"), (Tuples{{7, 1}, {1, 7}}));
}

TEST(ConfigSpace, Power2PolicyAndMaxFactor) {
  ConfigSpace s;
  s.define_split("t", 7, 2, SplitPolicy::Power2);
  EXPECT_EQ(split_candidates(s, "t"), (Tuples{{7, 1}, {4, 2}, {2, 4}}));

  ConfigSpace m;
  m.define_split("t", 100, 3, SplitPolicy::Power2, /*max_factor=*/8);
  for (const auto& t : split_candidates(m, "t")) {
    for (size_t i = 1; i < t.size(); ++i) {
      EXPECT_LE(t[i], 8);
      EXPECT_EQ(t[i] & (t[i] - 1), 0) << "not a power of two: " << t[i];
    }
    int64_t inner = t[1] * t[2];
    EXPECT_LE(inner, 100);
    EXPECT_EQ(t[0], (100 + inner - 1) / inner);  // tiles cover the extent
  }
  EXPECT_EQ(m.size(), 4 * 4);  // (f1, f2) in {1, 2, 4, 8}^2, all products <= 100
}

TEST(ConfigSpace, AllPolicyCoversExtentAndMixesDivisorsAndPowersOfTwo) {
  ConfigSpace s;
  s.define_split("t", 24, 3, SplitPolicy::All);
  const std::set<int64_t> allowed{1, 2, 3, 4, 6, 8, 12, 16, 24};
  std::set<std::vector<int64_t>> seen;
  for (const auto& t : split_candidates(s, "t")) {
    EXPECT_TRUE(allowed.count(t[1]) && allowed.count(t[2]));
    int64_t inner = t[1] * t[2];
    EXPECT_LE(inner, 24);
    EXPECT_EQ(t[0], (24 + inner - 1) / inner);
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(s.size()));
  EXPECT_TRUE(seen.count({2, 16, 1}));  // 16 does not divide 24: two tiles, one partial
}

TEST(ConfigSpace, RegisterTilePolicyAddsEverySmallCount) {
  ConfigSpace s;
  s.define_split("t", 14, 2, SplitPolicy::RegisterTile);  // {1, 2, 7, 14} U {4, 8} U 1..8
  std::vector<int64_t> inner;
  for (const auto& t : split_candidates(s, "t")) {
    inner.push_back(t[1]);
    EXPECT_EQ(t[0], (14 + t[1] - 1) / t[1]);
  }
  EXPECT_EQ(inner, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 14}));
  ConfigSpace small;
  small.define_split("t", 5, 2, SplitPolicy::RegisterTile);  // no count past the extent
  EXPECT_EQ(split_candidates(small, "t"), (Tuples{{5, 1}, {3, 2}, {2, 3}, {2, 4}, {1, 5}}));
}

TEST(ConfigSpace, KnobAddedLaterDefaultsToItsFirstCandidateInOldJson) {
  ConfigSpace s;
  s.define_knob("a", {10, 20});
  s.define_knob("chunk", {0, 64, 128}, KnobOrigin::AddedLater);
  Config old = Config::from_json(s, R"({"index": 1, "knobs": {"a": 20}})");
  EXPECT_EQ(old.knob("chunk"), 0);
  EXPECT_EQ(old.index(), 1);  // defined last: an old config keeps its index
  EXPECT_EQ(Config::from_json(s, R"({"knobs": {"a": 20, "chunk": 128}})").knob("chunk"), 128);
  ConfigSpace plain;
  plain.define_knob("a", {10, 20});
  plain.define_knob("chunk", {0, 64});
  expect_throw_naming<std::invalid_argument>(
      [&] { Config::from_json(plain, R"({"knobs": {"a": 20}})"); }, {"missing", "'chunk'"});
}

TEST(ConfigSpace, SplitFilterSeesFullTuple) {
  ConfigSpace s;
  s.define_split("t", 64, 3, SplitPolicy::Factors, 0,
                 [](const std::vector<int64_t>& t) { return t[2] >= 8 && t[0] > 1; });
  for (const auto& t : split_candidates(s, "t")) {
    EXPECT_GE(t[2], 8);
    EXPECT_GT(t[0], 1);
  }
  EXPECT_EQ(s.size(), 6);  // t2 in {8, 16, 32} with t0 * t1 = 64 / t2 and t0 > 1
}

TEST(ConfigSpace, RejectsBadDefinitions) {
  ConfigSpace s;
  s.define_knob("k", {1, 2});
  expect_throw_naming<std::invalid_argument>([&] { s.define_knob("k", {3}); }, {"'k'", "twice"});
  expect_throw_naming<std::invalid_argument>([&] { s.define_knob("r", {1, 1}); }, {"'r'"});
  expect_throw_naming<std::invalid_argument>([&] { s.define_knob("e", {}); }, {"'e'"});
  expect_throw_naming<std::invalid_argument>([&] { s.define_split("z", 0, 2); }, {"'z'"});
  expect_throw_naming<std::invalid_argument>(
      [&] { s.define_split("f", 8, 2, SplitPolicy::Factors, 0, [](auto&) { return false; }); },
      {"'f'", "no candidates"});
  expect_throw_naming<std::invalid_argument>(
      [&] {
        s.define_reorder("p", 3, {{0, 1, 2}, {0, 0, 1}});
      },
      {"'p'", "[0, 0, 1]"});
  expect_throw_naming<std::invalid_argument>(
      [&] {
        s.define_reorder("q", 2, {{1, 0}, {1, 0}});
      },
      {"'q'", "repeated"});
  EXPECT_EQ(s.knob_names(), std::vector<std::string>{"k"});  // failures add nothing
}

TEST(ConfigSpace, SizeOverflowIsAnError) {
  ConfigSpace s;
  std::vector<int64_t> many(1 << 16);
  std::iota(many.begin(), many.end(), 0);
  for (int i = 0; i < 3; ++i) s.define_knob("k" + std::to_string(i), many);  // 2^48
  EXPECT_THROW(s.define_knob("k3", many), std::overflow_error);
  EXPECT_EQ(s.size(), int64_t{1} << 48);
}

TEST(ConfigSpace, ReorderPermutations) {
  ConfigSpace s;
  s.define_reorder("all", 4);
  s.define_reorder("id", 3, ReorderPolicy::IdentityOnly);
  s.define_reorder("some", 3, {{2, 1, 0}, {0, 2, 1}});
  EXPECT_EQ(s.knob_sizes(), (std::vector<int64_t>{24, 1, 2}));
  std::set<std::vector<int>> seen;
  for (int64_t i = 0; i < 24; ++i) {
    std::vector<int> p = s.get(i).reorder("all");
    EXPECT_TRUE(std::is_permutation(p.begin(), p.end(), std::vector<int>{0, 1, 2, 3}.begin()));
    seen.insert(p);
  }
  EXPECT_EQ(seen.size(), 24u);
  EXPECT_EQ(s.get(0).reorder("all"), (std::vector<int>{0, 1, 2, 3}));  // identity first
  EXPECT_EQ(s.get(0).reorder("id"), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(s.get(24).reorder("some"), (std::vector<int>{0, 2, 1}));
}

TEST(ConfigSpace, AnnotatePolicies) {
  using A = Annotation;
  ConfigSpace s;
  s.define_annotate("none", 2, AnnotatePolicy::NoneOnly);
  s.define_annotate("u", 3, AnnotatePolicy::TryUnroll);
  s.define_annotate("v", 3, AnnotatePolicy::TryVec);
  s.define_annotate("uv", 3, AnnotatePolicy::TryUnrollVec);
  EXPECT_EQ(s.knob_sizes(), (std::vector<int64_t>{1, 8, 2, 12}));
  EXPECT_EQ(s.get(0).annotate("none"), (std::vector<A>{A::None, A::None}));
  EXPECT_EQ(s.get(1).annotate("u"), (std::vector<A>{A::None, A::None, A::Unroll}));
  EXPECT_EQ(s.get(8).annotate("v"), (std::vector<A>{A::None, A::None, A::Vectorize}));
  for (int64_t i = 0; i < s.size(); ++i) {
    auto uv = s.get(i).annotate("uv");
    EXPECT_NE(uv[0], A::Vectorize);
    EXPECT_NE(uv[1], A::Vectorize);
  }
}

TEST(ConfigSpace, IndexDecodingIsFirstKnobFastest) {
  ConfigSpace s;
  s.define_knob("a", {10, 20, 30});
  s.define_knob("b", {1, 2});
  Config c = s.get(4);  // 4 = 1 + 3 * 1
  EXPECT_EQ(c.knob("a"), 20);
  EXPECT_EQ(c.knob("b"), 2);
  EXPECT_EQ(c.choice_indices(), (std::vector<int64_t>{1, 1}));
  EXPECT_THROW(s.get(6), std::out_of_range);
  EXPECT_THROW(s.get(-1), std::out_of_range);
}

TEST(ConfigSpace, EveryIndexDecodesAndEncodesUniquely) {
  ConfigSpace s = mixed_space();
  ASSERT_EQ(s.size(), 28 * 4 * 6 * 12 * 2);
  std::set<std::string> texts;
  std::set<std::vector<int64_t>> choices;
  for (int64_t i = 0; i < s.size(); ++i) {
    Config c = s.get(i);
    ASSERT_EQ(c.index(), i);
    ASSERT_EQ(s.from_choices(c.choice_indices()).index(), i);
    choices.insert(c.choice_indices());
    texts.insert(c.to_json());
  }
  EXPECT_EQ(choices.size(), static_cast<size_t>(s.size()));
  EXPECT_EQ(texts.size(), static_cast<size_t>(s.size()));
}

TEST(ConfigSpace, RebuildingGivesTheSameIndices) {
  ConfigSpace a = mixed_space(), b = mixed_space();
  for (int64_t i = 0; i < a.size(); i += 37) EXPECT_EQ(a.get(i).to_json(), b.get(i).to_json());
}

TEST(ConfigSpace, JsonFormat) {
  ConfigSpace s = mixed_space();
  Config c = s.get(0);
  EXPECT_EQ(c.to_json(), R"({"index": 0, "knobs": {"tile_x": [64, 1, 1], "tile_y": [7, 1], )"
                         R"("order": [0, 1, 2], "ann": ["none", "none", "none"], "unroll": 0}})");
  Config last = s.get(s.size() - 1);
  EXPECT_EQ(last.to_json(),
            R"({"index": 16127, "knobs": {"tile_x": [1, 64, 1], "tile_y": [1, 7], )"
            R"("order": [2, 1, 0], "ann": ["unroll", "unroll", "vec"], "unroll": 16}})");
}

TEST(ConfigSpace, JsonRoundTripOfRandomConfigs) {
  ConfigSpace s = mixed_space();
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    Config c = s.random(rng);
    ASSERT_GE(c.index(), 0);
    ASSERT_LT(c.index(), s.size());
    Config back = Config::from_json(s, c.to_json());
    ASSERT_EQ(back.index(), c.index());
    ASSERT_EQ(back, c);
    ASSERT_EQ(back.to_json(), c.to_json());
  }
}

TEST(ConfigSpace, FromJsonIgnoresKeyOrderAndRecomputesIndex) {
  ConfigSpace s;
  s.define_knob("a", {10, 20, 30});
  s.define_split("t", 8, 2);
  Config c = Config::from_json(s, R"({"index": 999, "knobs": {"t": [2, 4], "a": 30}})");
  EXPECT_EQ(c.index(), 2 + 3 * 2);
  EXPECT_EQ(c.split("t"), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(Config::from_json(s, R"({"knobs": {"t": [8, 1], "a": 10}})").index(), 0);
}

TEST(ConfigSpace, FromJsonRejectsBadRecords) {
  ConfigSpace s = mixed_space();
  std::string good = s.get(5).to_json();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  auto rejects = [&](const std::string& text, std::vector<std::string> parts) {
    expect_throw_naming<std::invalid_argument>([&] { Config::from_json(s, text); }, parts);
  };
  rejects(with("\"unroll\": 0", "\"unroll\": 8"), {"'unroll'", "8"});
  rejects(with("\"unroll\": 0", "\"unroll\": 0.5"), {"'unroll'", "0.5"});
  rejects(with("\"tile_y\": [7, 1]", "\"tile_y\": [3, 3]"), {"'tile_y'", "[3,3]"});
  rejects(with("\"tile_y\": [7, 1]", "\"tile_y\": [7, 1, 1]"), {"'tile_y'"});
  rejects(with("\"order\": [0, 1, 2]", "\"order\": [0, 1, 1]"), {"'order'"});
  rejects(with("\"ann\": [", "\"ann\": [\"vec\", "), {"'ann'"});
  rejects(with("\"ann\": [\"none\"", "\"ann\": [\"fast\""), {"'ann'", "fast"});
  rejects(with(", \"unroll\": 0", ""), {"missing", "'unroll'"});
  rejects(with("\"unroll\": 0", "\"unroll\": 0, \"tile_z\": [1]"), {"unknown", "'tile_z'"});
  rejects(with("\"index\": 5", "\"index\": \"5\""), {"index"});
  rejects("{\"index\": 5, \"knobs\": {", {"parse"});
  rejects("[1, 2]", {"knobs"});
}

TEST(ConfigSpace, AccessorsNameUnknownKnobs) {
  Config c = mixed_space().get(3);
  expect_throw_naming<std::out_of_range>([&] { c.split("tile_z"); }, {"'tile_z'"});
  expect_throw_naming<std::out_of_range>([&] { c.knob("nope"); }, {"'nope'"});
  expect_throw_naming<std::invalid_argument>([&] { c.knob("tile_x"); }, {"'tile_x'", "split"});
  EXPECT_THROW(c.reorder("ann"), std::invalid_argument);
  EXPECT_THROW(c.annotate("order"), std::invalid_argument);
}

TEST(ConfigSpace, RandomSamplingStaysInRangeAndCoversSmallSpaces) {
  ConfigSpace s;
  s.define_split("t", 12, 2);
  s.define_knob("k", {0, 1, 2});
  std::mt19937_64 rng(7);
  std::set<int64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    Config c = s.random(rng);
    ASSERT_GE(c.index(), 0);
    ASSERT_LT(c.index(), s.size());
    seen.insert(c.index());
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(s.size()));
}

TEST(ConfigSpace, ConfigsKeepTheirSnapshotWhenTheSpaceGrows) {
  ConfigSpace s;
  s.define_knob("a", {1, 2});
  Config c = s.get(1);
  s.define_knob("b", {5, 6, 7});
  EXPECT_EQ(c.to_json(), R"({"index": 1, "knobs": {"a": 2}})");
  EXPECT_EQ(s.get(1).to_json(), R"({"index": 1, "knobs": {"a": 2, "b": 5}})");
  EXPECT_THROW(c.knob("b"), std::out_of_range);
}

}  // namespace
}  // namespace kiln::schedule
