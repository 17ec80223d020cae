#include "tuner/rank_test.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace kiln::tuner {
namespace {

// The number of orderings of n + m distinct values giving each U = 0..n*m.
// By the largest value: in the higher sample it lies above all n lower
// values (n pairs), in the lower sample above none, so
// f(i, j, u) = f(i - 1, j, u) + f(i, j - 1, u - i). Sums only, so doubles
// stay exact to their precision (C(n+m, n) outgrows 64 bits past 67 values).
std::vector<double> u_counts(size_t n, size_t m) {
  const size_t top = n * m;
  // prev[i][u] = f(i, j - 1, u); f(i, 0, u) is 1 at u = 0.
  std::vector<std::vector<double>> prev(n + 1, std::vector<double>(top + 1, 0.0));
  for (auto& row : prev) row[0] = 1;
  for (size_t j = 1; j <= m; ++j) {
    std::vector<std::vector<double>> cur(n + 1, std::vector<double>(top + 1, 0.0));
    cur[0][0] = 1;  // f(0, j, u): no lower values, no pairs
    for (size_t i = 1; i <= n; ++i)
      for (size_t u = 0; u <= i * j; ++u)
        cur[i][u] = cur[i - 1][u] + (u >= i ? prev[i][u - i] : 0.0);
    prev = std::move(cur);
  }
  return prev[n];
}

// Beyond this many pairs the exact count costs more than it is worth and
// the normal approximation (with continuity correction) is within 1e-3.
constexpr size_t kExactPairs = 4096;

double normal_tail(double u, size_t n, size_t m) {
  const double nd = static_cast<double>(n), md = static_cast<double>(m);
  const double mean = nd * md / 2, sd = std::sqrt(nd * md * (nd + md + 1) / 12);
  return 0.5 * std::erfc((u - 0.5 - mean) / (sd * std::sqrt(2.0)));
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double rank_test_p_lower(const std::vector<double>& lower, const std::vector<double>& higher) {
  if (lower.empty() || higher.empty()) return 1;
  double u = 0;
  for (double x : lower)
    for (double y : higher) u += x < y ? 1.0 : x == y ? 0.5 : 0.0;
  // A half from ties rounds down: the p-value of the next U below, the
  // larger, so ties never make a difference look surer than it is.
  const size_t at_least = static_cast<size_t>(std::floor(u));
  if (lower.size() * higher.size() > kExactPairs)
    return normal_tail(static_cast<double>(at_least), lower.size(), higher.size());
  std::vector<double> c = u_counts(lower.size(), higher.size());
  double total = 0, tail = 0;
  for (size_t k = 0; k < c.size(); ++k) {
    total += c[k];
    if (k >= at_least) tail += c[k];
  }
  return tail / total;
}

}  // namespace kiln::tuner
