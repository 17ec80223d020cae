#include "tuner/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <sstream>

#include "ops/op_template.h"
#include "tuner/config_match.h"

namespace kiln::tuner {

const char* const kLatencyNote =
    "Estimated latency: the sum over the model's template kernels (convolutions, dense layers) "
    "of the workload's mean measured time x its kernel count (a kernel with two implementations, "
    "direct and Winograd, counts the faster; the fallback column, the untuned build's). "
    "Not counted: layout transforms, "
    "operators outside the template kernels (pooling, softmax, reshapes, ...), memory traffic "
    "between kernels and the runtime's launch overhead; kernels whose workload has no correct "
    "measurement are left out and counted under 'untuned'.";

const char* const kInGraphNote =
    "In the model: this run's in-graph step timed the template kernels inside the compiled model "
    "(fused epilogues, neighbours and caches as in a real run), with the configs a build now "
    "picks and with the untuned ones; a dash where the step did not run for the model.";

namespace {

// A workload improved when its best GFLOP/s rose by more than 1% (less is
// within the noise of two measurements of one kernel).
constexpr double kImproved = 1.01;

// A longer pause between two records of a task is not tuning time.
constexpr double kPauseS = 600;

std::optional<ConfigMatcher> fallback_config(const std::string& workload_key,
                                             const codegen::Target& target) {
  try {
    ops::Workload w = ops::Workload::parse(workload_key);
    return ConfigMatcher(workload_key,
                         ops::get_template(w.template_name).fallback(w, target.isa()).to_json());
  } catch (const std::exception&) {
    return std::nullopt;  // no fallback to compare with: the report says "not measured"
  }
}

}  // namespace

JobReport make_job_report(const Job& job, const std::vector<JobModelWorkloads>& models,
                          const JobTasks& jt, const TuneSummary& summary, const RecordDB& db,
                          const codegen::Target& target, const nlohmann::json& previous,
                          const std::string& previous_path, int64_t started_unix) {
  JobReport r;
  r.job_file = job.file;
  r.tuning_log = db.path();
  r.target_key = summary.target_key;
  r.previous_report = previous.is_null() ? "" : previous_path;
  r.started_unix = started_unix;
  r.elapsed_s = summary.elapsed_s;
  r.run_trials = summary.run_trials;
  r.stop_reason = summary.stop_reason;

  std::map<std::string, double> prev_gflops, prev_ms;
  if (previous.is_object()) {
    for (const auto& t : previous.value("tasks", nlohmann::json::array()))
      if (t.contains("workload") && t.contains("best_gflops"))
        prev_gflops[t["workload"].get<std::string>()] = t["best_gflops"].get<double>();
    for (const auto& m : previous.value("models", nlohmann::json::array()))
      if (m.contains("name") && m.contains("estimated_ms") && m["estimated_ms"].is_number())
        prev_ms[m["name"].get<std::string>()] = m["estimated_ms"].get<double>();
  }

  std::map<std::string, size_t> task_of;
  for (size_t i = 0; i < jt.tasks.size(); ++i) {
    const Task& task = jt.tasks[i];
    task_of[task.workload_key] = i;
    JobReportTask t;
    t.workload_key = task.workload_key;
    t.template_name = task.template_name;
    t.count = task.count;
    t.flops = task.flops;
    t.trial_cap = jt.trials[i];
    t.state = i < summary.tasks.size() ? task_state_name(summary.tasks[i].state) : "not run";
    for (size_t m : jt.models_of[i]) t.models.push_back(models[m].model->name);
    auto pg = prev_gflops.find(task.workload_key);
    if (pg != prev_gflops.end()) t.previous_gflops = pg->second;

    std::optional<ConfigMatcher> fallback = fallback_config(task.workload_key, target);
    std::vector<Record> recs = db.records(task.workload_key, summary.target_key);
    t.trials = static_cast<int64_t>(recs.size());
    double best = 0, best_ms = 0;
    // Tuning time: the time between consecutive records, except that a pause
    // longer than kPauseS (between nightly runs) counts as nothing, so that a
    // task tuned over several nights has one continuous time axis.
    double seconds = 0;
    for (size_t k = 0; k < recs.size(); ++k) {
      const Record& rec = recs[k];
      if (k > 0) {
        double gap = static_cast<double>(rec.timestamp_unix - recs[k - 1].timestamp_unix);
        if (gap > 0 && gap <= kPauseS) seconds += gap;
      }
      const std::string cls = to_string(rec.error);
      if (rec.error != ErrorClass::kOk) {
        ++r.failures_all[cls];
        if (rec.timestamp_unix >= started_unix) ++r.failures_run[cls];
      }
      bool ok = rec.error == ErrorClass::kOk && rec.mean_ms() > 0;
      if (ok && fallback && t.fallback_ms == 0 && fallback->matches(rec.config_json))
        t.fallback_ms = rec.mean_ms();
      CurvePoint p{static_cast<int64_t>(k + 1), seconds, best};
      if (ok && (best_ms == 0 || rec.mean_ms() < best_ms)) {
        best_ms = rec.mean_ms();
        best = std::max(best, rec.gflops);
        p.best_gflops = best;
        t.curve.push_back(p);
      } else if (k + 1 == recs.size() && best > 0) {
        t.curve.push_back(p);  // the curve runs to the last trial
      }
    }
    t.best_gflops = best;
    t.best_ms = best_ms;
    r.tasks.push_back(std::move(t));
  }

  for (const JobModelWorkloads& mw : models) {
    JobReportModel m;
    m.name = mw.model->name;
    m.path = mw.model->path;
    m.error = mw.error;
    if (!mw.error.empty()) {
      ++r.failures_run["import_error"];
      ++r.failures_all["import_error"];
    }
    auto pm = prev_ms.find(m.name);
    if (pm != prev_ms.end()) m.previous_ms = pm->second;
    std::vector<std::vector<std::string>> kernels = mw.kernels;
    if (kernels.empty())
      for (const std::string& key : mw.workload_keys) kernels.push_back({key});
    for (const std::vector<std::string>& implementations : kernels) {
      // Now: the fastest measured implementation (what a build runs);
      // fallback: the untuned build's implementation (the first) on its
      // fallback config.
      ++m.kernels;
      double best_ms = 0;
      for (const std::string& key : implementations) {
        const JobReportTask& t = r.tasks[task_of.at(key)];
        if (t.best_ms > 0 && (best_ms == 0 || t.best_ms < best_ms)) best_ms = t.best_ms;
      }
      if (best_ms > 0)
        m.now_ms += best_ms;
      else
        ++m.untuned;
      const JobReportTask& untuned = r.tasks[task_of.at(implementations.at(0))];
      if (untuned.fallback_ms > 0)
        m.fallback_ms += untuned.fallback_ms;
      else
        ++m.no_fallback;
    }
    r.models.push_back(std::move(m));
  }
  return r;
}

std::string job_report_json(const JobReport& r) {
  nlohmann::json j;
  j["job"] = r.job_file;
  j["tuning_log"] = r.tuning_log;
  j["target"] = r.target_key;
  j["previous_report"] = r.previous_report;
  j["started_unix"] = r.started_unix;
  j["elapsed_s"] = r.elapsed_s;
  j["trials"] = r.run_trials;
  j["stop_reason"] = r.stop_reason;
  j["exit_status"] = r.exit_status;
  j["tasks"] = nlohmann::json::array();
  for (const JobReportTask& t : r.tasks) {
    nlohmann::json curve = nlohmann::json::array();
    for (const CurvePoint& p : t.curve) curve.push_back({p.trial, p.seconds, p.best_gflops});
    nlohmann::json task = {{"workload", t.workload_key},
                           {"template", t.template_name},
                           {"count", t.count},
                           {"flops", t.flops},
                           {"trials", t.trials},
                           {"trial_cap", t.trial_cap},
                           {"best_gflops", t.best_gflops},
                           {"best_ms", t.best_ms},
                           {"fallback_ms", t.fallback_ms},
                           {"state", t.state},
                           {"models", t.models},
                           {"curve", curve}};
    if (t.previous_gflops >= 0) task["previous_gflops"] = t.previous_gflops;
    j["tasks"].push_back(task);
  }
  j["models"] = nlohmann::json::array();
  for (const JobReportModel& m : r.models) {
    nlohmann::json model = {{"name", m.name}, {"path", m.path}};
    if (!m.error.empty()) {
      model["error"] = m.error;
    } else {
      model["kernels"] = m.kernels;
      model["untuned"] = m.untuned;
      model["no_fallback"] = m.no_fallback;
      model["fallback_ms"] = m.fallback_ms;
      model["estimated_ms"] = m.now_ms;
      if (m.previous_ms >= 0) model["previous_ms"] = m.previous_ms;
      if (m.in_graph)
        model["in_graph"] = {
            {"tuned_ms", m.in_graph->tuned_ms}, {"untuned_ms", m.in_graph->untuned_ms},
            {"kernels", m.in_graph->nodes},     {"tuned_kernels", m.in_graph->tuned_nodes},
            {"rounds", m.in_graph_rounds},      {"rounds_planned", m.in_graph_rounds_planned}};
    }
    j["models"].push_back(model);
  }
  j["failures_this_run"] = r.failures_run;
  j["failures_all_runs"] = r.failures_all;
  j["latency_note"] = kLatencyNote;
  return j.dump(2);
}

// ---- HTML ------------------------------------------------------------------

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string num(double v, int digits = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Times: milliseconds down to 0.1 ms, microseconds below (small kernels).
std::string ms(double v) {
  if (!(v > 0)) return "&ndash;";
  return v >= 0.1 ? num(v, 3) + " ms" : num(v * 1000, 2) + " us";
}

// The model's in-graph times, "28.6 ms / 33.0 ms (0.87x), 32 of 54 tuned",
// then ", 54 of 60 kernels timed" where the step timed only the kernels
// whose tasks had records (the times cover those, not the whole model), and
// " (3 of 7 rounds: time budget)" where the budget cut the step.
std::string in_graph_cell(const JobReportModel& m) {
  if (!m.in_graph) return "&ndash;";
  const InGraphEstimate& g = *m.in_graph;
  const size_t kernels = static_cast<size_t>(std::max(0, m.kernels));
  return ms(g.tuned_ms) + " / " + ms(g.untuned_ms) +
         (g.untuned_ms > 0 ? " (" + num(g.tuned_ms / g.untuned_ms, 2) + "x)" : "") + ", " +
         std::to_string(g.tuned_nodes) + " of " + std::to_string(g.nodes) + " tuned" +
         (g.nodes < kernels
              ? ", " + std::to_string(g.nodes) + " of " + std::to_string(kernels) + " kernels timed"
              : "") +
         (m.in_graph_rounds < m.in_graph_rounds_planned
              ? " (" + std::to_string(m.in_graph_rounds) + " of " +
                    std::to_string(m.in_graph_rounds_planned) + " rounds: time budget)"
              : "");
}

// A "nice" axis maximum: 1, 2 or 5 times a power of ten, at least v.
double nice_max(double v) {
  if (!(v > 0)) return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

// One chart: a step curve of best GFLOP/s (y) against x, drawn as a
// <polyline class="curve">; axes with their maxima written out.
std::string svg_chart(const std::vector<CurvePoint>& curve, bool by_time,
                      const std::string& title) {
  const double W = 340, H = 170, L = 48, R = 10, T = 22, B = 30;
  auto xval = [&](const CurvePoint& p) {
    return by_time ? p.seconds : static_cast<double>(p.trial);
  };
  double xmax = 1, ymax = 0;
  for (const CurvePoint& p : curve) {
    xmax = std::max(xmax, xval(p));
    ymax = std::max(ymax, p.best_gflops);
  }
  xmax = nice_max(xmax);
  ymax = nice_max(ymax);
  auto X = [&](double x) { return L + (W - L - R) * x / xmax; };
  auto Y = [&](double y) { return H - B - (H - T - B) * y / ymax; };
  std::ostringstream o;
  o << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\""
    << H << "\" viewBox=\"0 0 " << W << " " << H << "\">";
  o << "<text x=\"" << L << "\" y=\"14\" class=\"ct\">" << esc(title) << "</text>";
  // Axes and grid lines at half and full scale.
  o << "<line class=\"axis\" x1=\"" << L << "\" y1=\"" << Y(0) << "\" x2=\"" << X(xmax)
    << "\" y2=\"" << Y(0) << "\"/>";
  o << "<line class=\"axis\" x1=\"" << L << "\" y1=\"" << Y(0) << "\" x2=\"" << L << "\" y2=\""
    << Y(ymax) << "\"/>";
  for (double f : {0.5, 1.0})
    o << "<line class=\"grid\" x1=\"" << L << "\" y1=\"" << Y(ymax * f) << "\" x2=\"" << X(xmax)
      << "\" y2=\"" << Y(ymax * f) << "\"/><text class=\"tick\" x=\"" << L - 4 << "\" y=\""
      << Y(ymax * f) + 4 << "\" text-anchor=\"end\">" << num(ymax * f, ymax * f < 10 ? 1 : 0)
      << "</text>";
  o << "<text class=\"tick\" x=\"" << L - 4 << "\" y=\"" << Y(0) + 4
    << "\" text-anchor=\"end\">0</text>";
  o << "<text class=\"tick\" x=\"" << X(xmax) << "\" y=\"" << H - 16 << "\" text-anchor=\"end\">"
    << num(xmax, 0) << "</text>";
  o << "<text class=\"tick\" x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 4
    << "\" text-anchor=\"middle\">"
    << (by_time ? "seconds of tuning (pauses over 10 min left out)" : "trials") << "</text>";
  if (!curve.empty()) {
    // Steps: the best holds until the next improvement.
    o << "<polyline class=\"curve\" points=\"";
    double prev_y = -1;
    for (const CurvePoint& p : curve) {
      if (prev_y >= 0) o << num(X(xval(p)), 1) << "," << num(Y(prev_y), 1) << " ";
      o << num(X(xval(p)), 1) << "," << num(Y(p.best_gflops), 1) << " ";
      prev_y = p.best_gflops;
    }
    o << "\"/>";
  } else {
    o << "<text class=\"tick\" x=\"" << (L + W - R) / 2 << "\" y=\"" << H / 2
      << "\" text-anchor=\"middle\">no correct measurement</text>";
  }
  o << "</svg>";
  return o.str();
}

std::string fmt_time(int64_t unix) {
  std::time_t t = static_cast<std::time_t>(unix);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

const char* kCss =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}"
    "table{border-collapse:collapse;margin:8px 0 16px}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "td.l,th.l{text-align:left}th{background:#f2f2f2}"
    ".task{border:1px solid #ddd;margin:10px 0;padding:8px}"
    ".key{font:12px monospace;color:#555;word-break:break-all}"
    ".better{color:#070}.worse{color:#a00}.note{color:#555;font-size:12px;max-width:60em}"
    "svg .axis{stroke:#333}svg .grid{stroke:#ddd}svg .curve{fill:none;stroke:#1f5fbf;"
    "stroke-width:2}svg .tick{font-size:10px;fill:#555}svg .ct{font-size:11px;fill:#222}";

}  // namespace

std::string job_report_html(const JobReport& r) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kiln tuning job "
    << esc(r.job_file) << "</title><style>" << kCss << "</style></head><body>\n";
  o << "<h1>kiln tuning job</h1>\n<p>Job <b>" << esc(r.job_file) << "</b>, started "
    << fmt_time(r.started_unix) << ", " << r.run_trials << " trials in " << num(r.elapsed_s, 0)
    << " s (" << esc(r.stop_reason.empty() ? "done" : r.stop_reason) << "), exit status "
    << r.exit_status << ".<br>Records: " << esc(r.tuning_log) << "<br>Target: <span class=\"key\">"
    << esc(r.target_key) << "</span><br>Previous report: "
    << (r.previous_report.empty() ? "none" : esc(r.previous_report)) << "</p>\n";

  // Models.
  o << "<h2>Models</h2>\n<table id=\"models\"><tr><th class=\"l\">model</th><th>kernels</th>"
       "<th>fallback</th><th>previous report</th><th>now</th><th>speed-up vs fallback</th>"
       "<th>untuned</th><th>in the model: tuned / untuned</th></tr>\n";
  for (const JobReportModel& m : r.models) {
    o << "<tr><td class=\"l\">" << esc(m.name) << "</td>";
    if (!m.error.empty()) {
      o << "<td class=\"l worse\" colspan=\"7\">failed to import: " << esc(m.error)
        << "</td></tr>\n";
      continue;
    }
    o << "<td>" << m.kernels << "</td><td>" << ms(m.fallback_ms)
      << (m.no_fallback ? " (" + std::to_string(m.no_fallback) + " not measured)" : "")
      << "</td><td>" << (m.previous_ms >= 0 ? ms(m.previous_ms) : "&ndash;") << "</td><td>"
      << ms(m.now_ms) << "</td><td>"
      << (m.fallback_ms > 0 && m.now_ms > 0 && m.no_fallback == 0 && m.untuned == 0
              ? num(m.fallback_ms / m.now_ms, 2) + "x"
              : "&ndash;")
      << "</td><td>" << m.untuned << "</td><td>" << in_graph_cell(m) << "</td></tr>\n";
  }
  o << "</table>\n<p class=\"note\">" << esc(kLatencyNote) << " " << esc(kInGraphNote) << "</p>\n";

  // Improvements since the previous report.
  o << "<h2>Improved since the previous report</h2>\n";
  std::vector<const JobReportTask*> improved;
  for (const JobReportTask& t : r.tasks)
    if (t.previous_gflops >= 0 && t.best_gflops > t.previous_gflops * kImproved)
      improved.push_back(&t);
  if (r.previous_report.empty())
    o << "<p>No previous report.</p>\n";
  else if (improved.empty())
    o << "<p>No workload improved.</p>\n";
  else {
    o << "<table id=\"improved\"><tr><th class=\"l\">workload</th><th>before GFLOP/s</th>"
         "<th>now GFLOP/s</th><th>gain</th></tr>\n";
    for (const JobReportTask* t : improved)
      o << "<tr><td class=\"l key\">" << esc(t->workload_key) << "</td><td>"
        << num(t->previous_gflops) << "</td><td class=\"better\">" << num(t->best_gflops)
        << "</td><td>"
        << (t->previous_gflops > 0 ? num(t->best_gflops / t->previous_gflops, 2) + "x" : "new")
        << "</td></tr>\n";
    o << "</table>\n";
  }

  // Failures.
  o << "<h2>Failures by error class</h2>\n";
  if (r.failures_all.empty()) {
    o << "<p>None.</p>\n";
  } else {
    o << "<table id=\"failures\"><tr><th class=\"l\">error class</th><th>this run</th>"
         "<th>all runs</th></tr>\n";
    for (const auto& kv : r.failures_all) {
      auto run = r.failures_run.find(kv.first);
      o << "<tr><td class=\"l\">" << esc(kv.first) << "</td><td>"
        << (run == r.failures_run.end() ? 0 : run->second) << "</td><td>" << kv.second
        << "</td></tr>\n";
    }
    o << "</table>\n";
  }

  // Tasks.
  o << "<h2>Tasks</h2>\n";
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const JobReportTask& t = r.tasks[i];
    o << "<div class=\"task\"><h3>task " << i + 1 << ": " << esc(t.template_name) << "</h3>"
      << "<div class=\"key\">" << esc(t.workload_key) << "</div><p>best " << num(t.best_gflops)
      << " GFLOP/s (" << ms(t.best_ms) << "), fallback " << ms(t.fallback_ms) << "; " << t.trials
      << " of " << t.trial_cap << " trials, " << esc(t.state) << "; " << t.count << " kernels in ";
    for (size_t k = 0; k < t.models.size(); ++k) o << (k ? ", " : "") << esc(t.models[k]);
    o << "</p>" << svg_chart(t.curve, false, "best GFLOP/s by trial")
      << svg_chart(t.curve, true, "best GFLOP/s by time") << "</div>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

}  // namespace kiln::tuner
