#include "tuner/records.h"

#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "ops/op_template.h"
#include "schedule/config_space.h"
#include "support/output_file.h"
#include "tuner/record_backend.h"

namespace kiln::tuner {

// ---- error classes ------------------------------------------------------------------------------

namespace {

struct ErrorName {
  ErrorClass e;
  const char* name;
};
constexpr ErrorName kErrorNames[] = {
    {ErrorClass::kOk, "ok"},
    {ErrorClass::kCompileError, "compile_error"},
    {ErrorClass::kRuntimeError, "runtime_error"},
    {ErrorClass::kTimeout, "timeout"},
    {ErrorClass::kWrongResult, "wrong_result"},
    {ErrorClass::kInvalidConfig, "invalid_config"},
    {ErrorClass::kCompileBudget, "compile_budget"},
};

}  // namespace

const char* to_string(ErrorClass e) {
  for (const ErrorName& n : kErrorNames)
    if (n.e == e) return n.name;
  return "unknown";
}

ErrorClass parse_error_class(const std::string& s) {
  std::string valid;
  for (const ErrorName& n : kErrorNames) {
    if (s == n.name) return n.e;
    valid += (valid.empty() ? "" : ", ") + std::string(n.name);
  }
  throw std::invalid_argument("unknown error class \"" + s + "\" (expected one of " + valid + ")");
}

double Record::mean_ms() const {
  if (times_ms.empty()) return 0;
  double sum = 0;
  for (double t : times_ms) sum += t;
  return sum / static_cast<double>(times_ms.size());
}

// ---- records <-> JSON ---------------------------------------------------------------------------

using json = nlohmann::json;

// Sorted keys, no spaces: equal configs compare equal as text.
std::string canonical_config(const std::string& config_json) {
  json j;
  try {
    j = json::parse(config_json);
  } catch (const json::exception& e) {
    throw std::invalid_argument("config is not JSON: " + std::string(e.what()));
  }
  if (!j.is_object()) throw std::invalid_argument("config must be a JSON object: " + config_json);
  return j.dump();
}

// Checks a record and returns it with its config in canonical form.
Record validated_record(const Record& r) {
  std::string who = "record of workload \"" + r.workload_key + "\": ";
  if (r.workload_key.empty()) throw std::invalid_argument("record: empty workload key");
  if (r.target_key.empty()) throw std::invalid_argument(who + "empty target key");
  if (r.kiln_version.empty()) throw std::invalid_argument(who + "empty kiln version");
  Record out = r;
  try {
    out.config_json = canonical_config(r.config_json);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(who + e.what());
  }
  for (double t : r.times_ms)
    if (!std::isfinite(t) || t < 0)
      throw std::invalid_argument(who + "measured time " + std::to_string(t) +
                                  " is not a finite non-negative number");
  if (r.error == ErrorClass::kOk && r.times_ms.empty())
    throw std::invalid_argument(who + "an ok record needs at least one measured time");
  if (!std::isfinite(r.gflops) || r.gflops < 0)
    throw std::invalid_argument(who + "gflops " + std::to_string(r.gflops) +
                                " is not a finite non-negative number");
  if (to_string(r.error) == std::string("unknown"))
    throw std::invalid_argument(who + "invalid error class");
  return out;
}

namespace {

// "killed after the timeout of 2.5 s" -> 2.5 (measure.cc, measure_worker.cc).
std::optional<double> timeout_in_message(const std::string& message) {
  static const std::string kPrefix = "killed after the timeout of ";
  const size_t at = message.find(kPrefix);
  if (at == std::string::npos) return std::nullopt;
  const char* begin = message.c_str() + at + kPrefix.size();
  char* end = nullptr;
  const double t = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(t) || t <= 0) return std::nullopt;
  return t;
}

}  // namespace

bool timed_out_below(const std::string& error, const std::string& message, double timeout_s) {
  if (error != to_string(ErrorClass::kTimeout)) return false;
  std::optional<double> t = timeout_in_message(message);
  return t && *t < timeout_s;
}

std::optional<double> record_timeout_s(const Record& r) {
  if (r.error != ErrorClass::kTimeout) return std::nullopt;
  return timeout_in_message(r.error_message);
}

bool timed_out_below(const Record& r, double timeout_s) {
  return timed_out_below(to_string(r.error), r.error_message, timeout_s);
}

std::string record_to_json_line(const Record& r) {
  nlohmann::ordered_json j;
  j["workload"] = r.workload_key;
  j["target"] = r.target_key;
  j["config"] = nlohmann::ordered_json::parse(canonical_config(r.config_json));
  j["times_ms"] = r.times_ms;
  j["error"] = to_string(r.error);
  j["error_message"] = r.error_message;
  j["timestamp"] = r.timestamp_unix;
  j["kiln_version"] = r.kiln_version;
  j["gflops"] = r.gflops;
  return j.dump();
}

Record record_from_json_line(const std::string& line) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    throw std::invalid_argument("not JSON: " + std::string(e.what()));
  }
  if (!j.is_object()) throw std::invalid_argument("a record must be a JSON object");
  static const char* const kFields[] = {"workload",  "target",       "config",
                                        "times_ms",  "error",        "error_message",
                                        "timestamp", "kiln_version", "gflops"};
  for (const auto& [name, value] : j.items()) {
    bool known = false;
    for (const char* f : kFields) known = known || name == f;
    if (!known) throw std::invalid_argument("unknown field \"" + name + "\"");
  }
  auto need = [&](const char* name) -> const json& {
    auto it = j.find(name);
    if (it == j.end()) throw std::invalid_argument(std::string("missing field \"") + name + "\"");
    return *it;
  };
  auto string_field = [&](const char* name) {
    const json& v = need(name);
    if (!v.is_string())
      throw std::invalid_argument(std::string("field \"") + name + "\" must be a string");
    return v.get<std::string>();
  };
  Record r;
  r.workload_key = string_field("workload");
  r.target_key = string_field("target");
  const json& config = need("config");
  if (!config.is_object()) throw std::invalid_argument("field \"config\" must be a JSON object");
  r.config_json = config.dump();
  const json& times = need("times_ms");
  if (!times.is_array()) throw std::invalid_argument("field \"times_ms\" must be an array");
  for (const json& t : times) {
    if (!t.is_number()) throw std::invalid_argument("field \"times_ms\" must hold numbers");
    r.times_ms.push_back(t.get<double>());
  }
  r.error = parse_error_class(string_field("error"));
  if (j.contains("error_message")) r.error_message = string_field("error_message");
  const json& ts = need("timestamp");
  if (!ts.is_number_integer())
    throw std::invalid_argument("field \"timestamp\" must be an integer");
  r.timestamp_unix = ts.get<int64_t>();
  r.kiln_version = string_field("kiln_version");
  if (j.contains("gflops")) {
    if (!j["gflops"].is_number()) throw std::invalid_argument("field \"gflops\" must be a number");
    r.gflops = j["gflops"].get<double>();
  }
  return validated_record(r);
}

// ---- claim owners -------------------------------------------------------------------------------

const std::string& this_host() {
  static const std::string host = [] {
    char name[256] = {0};
    if (gethostname(name, sizeof name - 1) != 0) std::snprintf(name, sizeof name, "unknown");
    return std::string(name);
  }();
  return host;
}

// An owner is "pid@host/token" (make_claim_owner). A pid of this host that no
// longer exists (kill(pid, 0) fails with ESRCH) will never store or renew what
// it claimed: without reaping, a tuner killed with -9 would hold its batch, and
// its share of the trial cap, until the claims expire (kClaimTtlS). Claims of
// other hosts wait for their expiry. A reused pid only keeps a claim until then.
bool owner_is_dead_local_process(const std::string& owner) {
  const size_t at = owner.find('@'), slash = owner.find('/', at == std::string::npos ? 0 : at);
  if (at == std::string::npos || slash == std::string::npos) return false;
  if (owner.compare(at + 1, slash - at - 1, this_host()) != 0) return false;
  char* end = nullptr;
  const long pid = std::strtol(owner.c_str(), &end, 10);
  if (end != owner.c_str() + at || pid <= 0 || pid == ::getpid()) return false;
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::string make_claim_owner() {
  std::random_device rd;
  uint64_t token =
      (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(token));
  return std::to_string(::getpid()) + "@" + this_host() + "/" + buf;
}

// ---- backends -----------------------------------------------------------------------------------

bool is_postgres_url(const std::string& path_or_url) {
  return path_or_url.rfind("postgresql://", 0) == 0 || path_or_url.rfind("postgres://", 0) == 0;
}

std::string redact_url(const std::string& url) {
  // scheme://[user[:password]@]host...: drop ":password" of the user info.
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const size_t start = scheme + 3;
  const size_t end = url.find_first_of("/?", start);
  const size_t at = url.rfind('@', end == std::string::npos ? std::string::npos : end);
  std::string out = url;
  if (at != std::string::npos && at >= start) {
    const size_t colon = url.find(':', start);
    if (colon != std::string::npos && colon < at) out = url.substr(0, colon) + url.substr(at);
  }
  // A password may also come as a query parameter (?password=...).
  const size_t q = out.find("password=");
  if (q != std::string::npos && q > 0 && (out[q - 1] == '?' || out[q - 1] == '&')) {
    const size_t amp = out.find('&', q);
    out = out.substr(0, q) + "password=***" + (amp == std::string::npos ? "" : out.substr(amp));
  }
  return out;
}

// ---- RecordDB -----------------------------------------------------------------------------------

RecordDB::RecordDB(std::unique_ptr<RecordBackend> backend) : impl_(std::move(backend)) {}
RecordDB::RecordDB(RecordDB&&) noexcept = default;
RecordDB& RecordDB::operator=(RecordDB&&) noexcept = default;
RecordDB::~RecordDB() = default;

RecordDB RecordDB::open(const std::string& path_or_url, Mode mode) {
  if (is_postgres_url(path_or_url)) return RecordDB(open_postgres_backend(path_or_url, mode));
  // "mysql://h/db" is a URL of a store kiln does not speak, not a file name
  // (sqlite would say "unable to open database file").
  if (size_t colon = path_or_url.find("://"); colon != std::string::npos && colon > 0) {
    std::string scheme = path_or_url.substr(0, colon);
    bool is_scheme = std::isalpha(static_cast<unsigned char>(scheme[0]));
    for (char c : scheme)
      is_scheme = is_scheme &&
                  (std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.');
    if (is_scheme)
      throw std::runtime_error("'" + redact_url(path_or_url) + "': unsupported scheme '" + scheme +
                               "'; kiln stores records in sqlite files or postgresql:// URLs");
  }
  return RecordDB(open_sqlite_backend(path_or_url, mode));
}

const std::string& RecordDB::path() const { return impl_->where_name(); }

void RecordDB::set_busy_timeout_ms(int64_t ms) { impl_->set_busy_timeout_ms(ms); }

namespace {

std::string where(const RecordBackend& b) { return "records database '" + b.where_name() + "'"; }

}  // namespace

void RecordDB::add(const Record& r) { add_batch({r}); }

void RecordDB::add_batch(const std::vector<Record>& rs) {
  std::vector<Record> ok;
  ok.reserve(rs.size());
  for (const Record& r : rs) {
    try {
      ok.push_back(validated_record(r));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where(*impl_) + ": " + e.what());
    }
  }
  impl_->add_batch(ok);
}

ClaimResult RecordDB::claim(const std::string& workload_key, const std::string& target_key,
                            const std::vector<std::string>& configs, const std::string& owner,
                            int64_t max_trials, int64_t ttl_s, double retry_timeouts_below_s) {
  std::vector<std::string> canonical;
  for (const std::string& c : configs) {
    try {
      canonical.push_back(canonical_config(c));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where(*impl_) + ": claim: " + e.what());
    }
  }
  if (owner.empty()) throw std::invalid_argument(where(*impl_) + ": claim: empty owner");
  return impl_->claim(workload_key, target_key, canonical, owner, max_trials, ttl_s,
                      retry_timeouts_below_s);
}

void RecordDB::renew_claims(const std::string& owner, int64_t ttl_s) {
  impl_->renew_claims(owner, ttl_s);
}

void RecordDB::release_claims(const std::string& owner) { impl_->release_claims(owner); }

int64_t RecordDB::live_claims(const std::string& workload_key,
                              const std::string& target_key) const {
  return impl_->live_claims(workload_key, target_key);
}

std::vector<ClaimHolder> RecordDB::live_claim_holders() const {
  return impl_->live_claim_holders();
}

std::optional<Record> RecordDB::best(const std::string& workload_key,
                                     const std::string& target_key) const {
  return impl_->best(workload_key, target_key);
}

std::vector<Record> RecordDB::records(const std::string& workload_key,
                                      const std::string& target_key) const {
  return impl_->records(workload_key, target_key);
}

bool RecordDB::has_config(const std::string& workload_key, const std::string& target_key,
                          const std::string& config_json) const {
  std::string canonical;
  try {
    canonical = canonical_config(config_json);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where(*impl_) + ": has_config: " + e.what());
  }
  return impl_->has_config(workload_key, target_key, canonical);
}

std::vector<std::string> RecordDB::workloads(const std::string& target_key) const {
  return impl_->workloads(target_key);
}

std::vector<std::string> RecordDB::targets() const { return impl_->targets(); }

size_t RecordDB::count() const { return impl_->count(); }

std::vector<Record> RecordDB::all_records(const std::string& workload_key) const {
  return impl_->all_records(workload_key);
}

size_t RecordDB::export_jsonl(std::ostream& out, const std::string& workload_key) const {
  std::vector<Record> rs = impl_->all_records(workload_key);
  for (const Record& r : rs) out << record_to_json_line(r) << '\n';
  return rs.size();
}

size_t RecordDB::export_jsonl(const std::string& path, const std::string& workload_key) const {
  // Whole or not at all; a device or FIFO is written through, a symlink's
  // target replaced (support/output_file.h).
  std::ostringstream out;
  size_t n = export_jsonl(out, workload_key);
  support::write_output_file(path, out.str());
  return n;
}

namespace {

// A record of one of this kiln's templates must name a point of the
// workload's config space (a record of kInvalidConfig excepted: that is its
// finding): knobs the space lacks would never match a config again, and a
// build would skip them without a word. Records of templates this kiln does
// not have (another version's) are kept as they are.
void check_config_in_space(const Record& r) {
  if (r.error == ErrorClass::kInvalidConfig) return;
  ops::Workload w;
  try {
    w = ops::Workload::parse(r.workload_key);
  } catch (const std::exception&) {
    return;  // not a template workload key of this kiln
  }
  const ops::OpTemplate* t = ops::find_template(w.template_name);
  if (!t) return;
  try {
    schedule::Config::from_json(t->space(w), r.config_json);
  } catch (const std::exception& e) {
    throw std::invalid_argument("config is not a point of " + w.template_name + "'s space (" +
                                e.what() + ")");
  }
}

}  // namespace

size_t RecordDB::import_records(const std::vector<Record>& rs) {
  std::vector<Record> ok;
  ok.reserve(rs.size());
  for (size_t i = 0; i < rs.size(); ++i) {
    try {
      ok.push_back(validated_record(rs[i]));
      check_config_in_space(ok.back());
    } catch (const std::exception& e) {
      throw std::invalid_argument(where(*impl_) + ": record " + std::to_string(i + 1) + " of " +
                                  std::to_string(rs.size()) + " (workload \"" + rs[i].workload_key +
                                  "\"): " + e.what() + " (nothing was added)");
    }
  }
  return impl_->import_records(ok);
}

size_t RecordDB::import_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read '" + path + "'");
  std::vector<Record> rs;
  std::string line;
  for (size_t lineno = 1; std::getline(in, line); ++lineno) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    try {
      rs.push_back(record_from_json_line(line));
      check_config_in_space(rs.back());
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ":" + std::to_string(lineno) + ": " + e.what() +
                               " (nothing was imported into '" + impl_->where_name() + "')");
    }
  }
  if (in.bad()) throw std::runtime_error("cannot read '" + path + "'");
  return impl_->import_records(rs);
}

size_t sync_records(const RecordDB& from, RecordDB& to) {
  return to.import_records(from.all_records());
}

}  // namespace kiln::tuner
