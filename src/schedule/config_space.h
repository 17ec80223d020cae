// Configuration spaces of schedule templates: the knobs a template exposes to
// the tuner and the points (configs) of their cartesian product.
//
// A template defines its knobs once, in a fixed order, when it is instantiated
// for a workload; the tuner then names configs by a flat index and stores them
// as JSON. Both encodings are only meaningful if the same definitions always
// yield the same space, so everything here is deterministic: candidates are
// enumerated in a documented order, nothing depends on hashing or addresses,
// and filter callbacks must be pure functions of their argument.
//
// This file depends on nothing else in kiln (plain C++ and nlohmann-json in the
// .cc), so the tuner's records code can use it without pulling in the IR.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kiln::schedule {

// How define_split chooses the candidate tuples (f0, f1, ..., f_{n-1}) that
// split a loop of `extent` iterations into n nested loops, f0 outermost. The
// inner factors f1..f_{n-1} are chosen; f0 is always derived from them so that
// the nest covers the extent:  P = f1 * ... * f_{n-1},  f0 = ceil(extent / P).
// Every policy requires P <= extent (a larger inner tile would only iterate
// over padding). `max_factor` > 0 bounds each inner factor, never f0.
enum class SplitPolicy {
  // Exact factorizations: every tuple has f0 * P == extent, so no tail. For
  // extent = p^k the count of n-tuples is C(k + n - 1, n - 1) (64, n = 3: 28);
  // a prime extent has exactly n tuples (the extent in one position).
  Factors,
  // Inner factors are powers of two (1, 2, 4, ...); f0 = ceil(extent / P), so
  // the last outer iteration may be partial when P does not divide extent.
  Power2,
  // Inner factors are drawn from the divisors of extent united with the powers
  // of two up to extent; f0 = ceil(extent / P). Extent 7, n = 2 gives inner
  // factors {1, 2, 4, 7}: (7,1) (4,2) (2,4) (1,7).
  All,
  // All's inner factors and every count up to 8: a register tile's width,
  // where 3 or 6 columns (12 accumulators of 16 registers) fit best and a
  // partial last tile is peeled off by the lowering (peel_tail_loops.h).
  RegisterTile,
};

// Policies of define_reorder. A reorder value is a permutation `perm` of
// 0..num_axes-1: the template's axes in their new order, outermost first.
enum class ReorderPolicy {
  All,           // every permutation, in lexicographic order (identity first)
  IdentityOnly,  // only the identity (a placeholder that keeps the knob stable)
};

// What to do with one loop axis.
enum class Annotation : uint8_t { None = 0, Unroll = 1, Vectorize = 2 };

// Policies of define_annotate; each value holds one Annotation per axis.
enum class AnnotatePolicy {
  NoneOnly,      // every axis None (1 candidate)
  TryUnroll,     // every axis None or Unroll (2^n candidates)
  TryVec,        // last axis None or Vectorize, the others None (2 candidates)
  TryUnrollVec,  // last axis None/Unroll/Vectorize, the others None/Unroll (3 * 2^(n-1))
};

enum class KnobKind { Split, Knob, Reorder, Annotate };

// Whether a knob was in its template's space from the start (see define_knob).
enum class KnobOrigin { Original, AddedLater };

// "none", "unroll", "vec": the spelling used in JSON.
const char* annotation_name(Annotation a);
const char* knob_kind_name(KnobKind k);

// A pure predicate over a full split tuple (f0 included); false drops it.
using SplitFilter = std::function<bool(const std::vector<int64_t>&)>;

namespace detail {
struct Knob;
struct SpaceData;
}  // namespace detail

class ConfigSpace;

// One point of a ConfigSpace: one candidate chosen for every knob. A Config
// keeps the space's definitions alive (it shares an immutable snapshot), so it
// stays valid if the ConfigSpace it came from is changed or destroyed.
class Config {
 public:
  Config();  // the single point of an empty space; accessors throw

  // The value chosen for a knob. An unknown name throws std::out_of_range and
  // a knob of another kind std::invalid_argument, both naming the knob.
  const std::vector<int64_t>& split(const std::string& name) const;  // (f0, ..., f_{n-1})
  int64_t knob(const std::string& name) const;
  // Whether the space has a knob (of any kind) of that name: for templates
  // whose space depends on the workload.
  bool has_knob(const std::string& name) const;
  const std::vector<int>& reorder(const std::string& name) const;
  const std::vector<Annotation>& annotate(const std::string& name) const;

  // Flat index in the space (see ConfigSpace::get for the encoding).
  int64_t index() const { return index_; }
  // Per knob, in definition order, the position of the chosen candidate in
  // that knob's candidate list: a compact feature vector for cost models.
  const std::vector<int64_t>& choice_indices() const { return choices_; }

  // One line, keys in definition order, e.g.
  //   {"index": 17, "knobs": {"tile_x": [4, 16, 16], "unroll": 1,
  //    "order": [0, 2, 1], "ann": ["none", "unroll", "vec"]}}
  std::string to_json() const;
  // Parses to_json's format and checks it against `space`: every knob of the
  // space must be present with a value among its candidates, and no other knob
  // may appear; errors throw std::invalid_argument naming the knob and value.
  // The knob values are the record: the index is recomputed from them, and a
  // stored "index" (optional) is only type-checked, because indices change
  // when a template's candidate lists change while the values keep meaning.
  static Config from_json(const ConfigSpace& space, const std::string& json);

  // Same space definitions (by knob names) and same choices.
  bool operator==(const Config& other) const;

 private:
  friend class ConfigSpace;
  Config(std::shared_ptr<const detail::SpaceData> space, std::vector<int64_t> choices,
         int64_t index);
  size_t knob_position(const std::string& name, KnobKind kind) const;

  std::shared_ptr<const detail::SpaceData> space_;
  std::vector<int64_t> choices_;
  int64_t index_ = 0;
};

// An ordered list of knobs; the space is the cartesian product of their
// candidate lists. Names must be unique, every knob must have at least one
// candidate, and the product must fit in int64_t (else the define throws).
class ConfigSpace {
 public:
  ConfigSpace();

  // Splits a loop of `extent` iterations into `num_outputs` loops; see
  // SplitPolicy for which tuples are candidates. Candidates are ordered
  // lexicographically by their inner factors (f1, ..., f_{n-1}), ascending.
  void define_split(const std::string& name, int64_t extent, int num_outputs,
                    SplitPolicy policy = SplitPolicy::Factors, int64_t max_factor = 0,
                    const SplitFilter& filter = {});
  // A plain integer knob; candidates are kept in the given order, no repeats.
  // AddedLater: a knob new to a template whose configs are already stored
  // (tuning databases, kiln's shipped logs): config JSON without it takes the
  // first candidate, which must keep the template's old behaviour. Define it
  // last, so that old configs also keep their flat index.
  void define_knob(const std::string& name, std::vector<int64_t> candidates,
                   KnobOrigin origin = KnobOrigin::Original);
  // Loop orders of `num_axes` axes (All is limited to 8 axes: 40320 orders).
  void define_reorder(const std::string& name, int num_axes,
                      ReorderPolicy policy = ReorderPolicy::All);
  // Loop orders from an explicit list of distinct permutations, kept in order.
  void define_reorder(const std::string& name, int num_axes,
                      std::vector<std::vector<int>> candidates);
  // One Annotation per axis. Candidates are ordered lexicographically with
  // None < Unroll < Vectorize and the first axis most significant.
  void define_annotate(const std::string& name, int num_axes, AnnotatePolicy policy);

  // Number of configs: the product of knob_sizes() (1 for an empty space).
  int64_t size() const;
  const std::vector<std::string>& knob_names() const;
  std::vector<int64_t> knob_sizes() const;
  KnobKind knob_kind(const std::string& name) const;

  // Mixed-radix decoding with the FIRST-defined knob varying fastest:
  //   index = c_0 + s_0 * (c_1 + s_1 * (c_2 + ...)),
  // c_k the candidate position of knob k and s_k its candidate count.
  // Throws std::out_of_range unless 0 <= index < size().
  Config get(int64_t index) const;
  // The config with the given candidate position per knob (definition order).
  Config from_choices(const std::vector<int64_t>& choices) const;
  // A uniformly random config (std::uniform_int_distribution over indices).
  Config random(std::mt19937_64& rng) const;

 private:
  friend class Config;
  void add_knob(detail::Knob&& knob);

  // Copy-on-write: Configs share the snapshot they were made from, and a
  // define after that copies the data rather than changing their space.
  std::shared_ptr<detail::SpaceData> data_;
};

}  // namespace kiln::schedule
