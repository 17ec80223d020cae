// A one-sided rank test (Mann-Whitney U) for "these times are lower than
// those": what kiln tune's in-graph step uses to tell a tuned config that
// runs faster inside the model from one that only drew lucky samples
// (in_graph_records.h, clearly_faster). Ranks, not means: a descheduled
// worker thread makes one time 20x the others, and a rank test gives that
// sample the weight of any other slow one.
#pragma once

#include <vector>

namespace kiln::tuner {

// The probability, were both samples drawn from one distribution, of
// `lower`'s times beating `higher`'s at least as often as they do: U counts
// the pairs (x from lower, y from higher) with x < y, a tie counting half;
// the p-value is P(U' >= U) under the null, exact (the distribution of U
// over every ordering of the n + m values). Small: `lower` is faster.
// Returns 1 when either sample is empty.
double rank_test_p_lower(const std::vector<double>& lower, const std::vector<double>& higher);

// The median of a non-empty sample (the mean of the middle two for an even count).
double median(std::vector<double> v);

}  // namespace kiln::tuner
