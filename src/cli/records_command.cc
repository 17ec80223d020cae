// kiln records: move tuning records between databases, as JSON lines or
// directly (sync: sqlite files and PostgreSQL databases, either direction).
#include "cli/records_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "support/output_file.h"
#include "support/same_file.h"
#include "tuner/records.h"
#include "tuner/tuned_configs.h"

namespace kiln::cli {
namespace {

const char* kRecordsUsage =
    "usage: kiln records export DB -o OUT.jsonl [--workload KEY] [--best]\n"
    "       kiln records import DB IN.jsonl\n"
    "       kiln records sync FROM TO\n"
    "  export   write DB's records as JSON lines (one record a line, sorted by workload);\n"
    "           -o - writes to stdout; --workload keeps one workload's records; --best keeps\n"
    "           per workload and target the record a build would pick (and the fastest; for\n"
    "           in-graph records also the untuned config's, which a build weighs them against),\n"
    "           as kiln's shipped logs/ are made; a note counts the in-graph picks whose\n"
    "           step timed no record of today's untuned config (a build on the log runs\n"
    "           their fallback)\n"
    "  import   add the records of IN.jsonl to DB (created if absent), skipping records\n"
    "           DB holds already; a bad line imports nothing\n"
    "  sync     copy every record of FROM into TO (created if absent), skipping records TO\n"
    "           holds already, in one transaction: a second sync copies 0\n"
    "  DB, FROM and TO are sqlite files or PostgreSQL URLs (postgresql://user@host:port/db)\n";

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// --best: the records a build would use, one JSON line each; a file is
// written whole or not at all.
size_t export_best(const tuner::RecordDB& db, const std::string& workload, const std::string& out) {
  std::string text;
  size_t n = 0, unweighed = 0;
  const std::vector<tuner::Record> records =
      tuner::best_records(db, workload.empty() ? &unweighed : nullptr);
  // A log made from them would leave these nodes on their fallback: say so
  // before it ships (logs/README.md, "A log's in-graph records need today's
  // untuned config").
  if (unweighed > 0)
    std::fprintf(stderr,
                 "kiln records: note: %zu in-graph pick%s no record of today's untuned config "
                 "from the same step; a build on the exported log runs %s fallback instead "
                 "(`kiln tune` with %s times it)\n",
                 unweighed, unweighed == 1 ? " has" : "s have", unweighed == 1 ? "its" : "their",
                 db.path().c_str());
  for (const tuner::Record& r : records) {
    if (!workload.empty() && r.workload_key != workload) continue;
    text += tuner::record_to_json_line(r) + "\n";
    ++n;
  }
  std::cout.flush();
  support::write_output_file(out, text, /*allow_stdout=*/true);
  return n;
}

int run_export(const std::vector<std::string>& args) {
  std::string db, out, workload;
  bool have_workload = false, best = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw UsageError(s + " needs a value");
      return args[++i];
    };
    if (s == "-o" || s == "--output")
      out = value();
    else if (s == "--workload")
      workload = value(), have_workload = true;
    else if (s == "--best")
      best = true;
    else if (s.size() > 1 && s[0] == '-')
      throw UsageError("unknown option " + s);
    else if (db.empty())
      db = s;
    else
      throw UsageError("unexpected argument '" + s + "'");
  }
  if (db.empty()) throw UsageError("no database given");
  if (out.empty()) throw UsageError("no output given (-o OUT.jsonl, or -o - for stdout)");
  if (have_workload && workload.empty()) throw UsageError("--workload needs a non-empty key");
  if (out != "-") {
    support::refuse_output_over_input(out, {{"the database", db}});
    support::refuse_output_over_database(out, "the database", db);
    support::refuse_read_only_output(out);
  }
  support::check_output_writable(out, /*allow_stdout=*/true);
  tuner::RecordDB records = tuner::RecordDB::open(db, tuner::RecordDB::Mode::kMustExist);
  // An unknown workload is most likely a typo: say so instead of writing nothing.
  if (!workload.empty()) {
    std::ostringstream probe;
    if (records.export_jsonl(probe, workload) == 0)
      throw std::runtime_error("no records of workload '" + workload + "' in '" + records.path() +
                               "'");
  }
  size_t n = 0;
  if (best) {
    n = export_best(records, workload, out);
  } else {
    // Whole or not at all (support/output_file.h): a file is replaced through a
    // temporary, a device, FIFO or stdout is written through.
    std::ostringstream text;
    n = records.export_jsonl(text, workload);
    std::cout.flush();
    support::write_output_file(out, text.str(), /*allow_stdout=*/true);
  }
  std::fprintf(stderr, "kiln records: exported %zu record%s from %s to %s\n", n, n == 1 ? "" : "s",
               records.path().c_str(), out == "-" ? "stdout" : out.c_str());
  return 0;
}

// Opens `db` (created if absent) and runs f on it; a failure leaves no new,
// empty sqlite file behind (a PostgreSQL database is the server's and stays).
template <typename F>
void into_new_or_existing(const std::string& db, F&& f) {
  const bool is_file = !tuner::is_postgres_url(db);
  const bool existed = !is_file || std::filesystem::exists(db);
  try {
    tuner::RecordDB records = tuner::RecordDB::open(db);
    f(records);
  } catch (...) {
    std::error_code ec;
    if (!existed)
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db + suffix, ec);
    throw;
  }
}

int run_import(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  for (const std::string& s : args) {
    if (s.size() > 1 && s[0] == '-') throw UsageError("unknown option " + s);
    pos.push_back(s);
  }
  if (pos.size() != 2) throw UsageError("import needs a database and a JSONL file");
  size_t added = 0, total = 0;
  std::string name;
  into_new_or_existing(pos[0], [&](tuner::RecordDB& records) {
    added = records.import_jsonl(pos[1]);
    total = records.count();
    name = records.path();
  });
  std::fprintf(stderr, "kiln records: imported %zu new record%s from %s into %s (%zu in all)\n",
               added, added == 1 ? "" : "s", pos[1].c_str(), name.c_str(), total);
  return 0;
}

int run_sync(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  for (const std::string& s : args) {
    if (s.size() > 1 && s[0] == '-') throw UsageError("unknown option " + s);
    pos.push_back(s);
  }
  if (pos.size() != 2) throw UsageError("sync needs two databases: FROM and TO");
  // One database twice (a.db a.db, a link to it, the same URL): nothing to
  // copy, and a mistake of the user's worth naming.
  if (pos[0] == pos[1] || (!tuner::is_postgres_url(pos[0]) && support::same_path(pos[0], pos[1])))
    throw std::runtime_error("'" + pos[0] + "' and '" + pos[1] +
                             "' are the same database: refusing to sync it with itself");
  tuner::RecordDB from = tuner::RecordDB::open(pos[0], tuner::RecordDB::Mode::kMustExist);
  size_t added = 0, total = 0, read = 0;
  std::string name;
  into_new_or_existing(pos[1], [&](tuner::RecordDB& to) {
    std::vector<tuner::Record> rs = from.all_records();
    read = rs.size();
    added = to.import_records(rs);
    total = to.count();
    name = to.path();
  });
  std::fprintf(stderr,
               "kiln records: copied %zu new record%s from %s to %s (%zu already there, %zu in "
               "all)\n",
               added, added == 1 ? "" : "s", from.path().c_str(), name.c_str(), read - added,
               total);
  return 0;
}

}  // namespace

int run_records(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kRecordsUsage, stderr);
    return 2;
  }
  const std::string& sub = args[0];
  if (sub == "help" || sub == "--help" || sub == "-h") {
    std::fputs(kRecordsUsage, stdout);
    return 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (sub == "export") return run_export(rest);
    if (sub == "import") return run_import(rest);
    if (sub == "sync") return run_sync(rest);
    throw UsageError("unknown subcommand '" + sub + "'");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "kiln records: %s\n%s", e.what(), kRecordsUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln records %s: error: %s\n", sub.c_str(), e.what());
    return 1;
  }
}

}  // namespace kiln::cli
