// The report of a tuning job (`kiln tune --job J --report report.html
// --report report.json`): what a person reads the morning after.
//
// Built from the run's TuneSummary and the records database (so that trials
// of earlier runs and of workers joining the job show too), it holds per task
// the best GFLOP/s after each trial and over time, per model the estimated
// latency of its template kernels with the fallback configs, in the previous
// report and now, the workloads that improved since the previous report, and
// the failures by error class. Two renderings: JSON (read back as the next
// run's previous report) and one self-contained HTML page whose charts are
// inline SVG drawn here (no script, no external file).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "tuner/in_graph_records.h"
#include "tuner/job.h"
#include "tuner/records.h"
#include "tuner/tune_loop.h"

namespace kiln::tuner {

struct CurvePoint {
  int64_t trial = 0;  // 1-based, every record of the workload counted, failures included
  // Tuning time since the workload's first record: a pause of more than 10 min
  // between two records (between runs) is left out.
  double seconds = 0;
  double best_gflops = 0;  // best so far
};

struct JobReportTask {
  std::string workload_key, template_name;
  int count = 0;                // kernels over every model
  double flops = 0;             // of one call
  int64_t trials = 0;           // records in the database (every run)
  int64_t trial_cap = 0;        // what the job asks for
  double best_gflops = 0;       // 0: nothing measured correctly
  double best_ms = 0;           // mean time of the best record; 0: none
  double fallback_ms = 0;       // the template's fallback config as measured; 0: not measured
  double previous_gflops = -1;  // in the previous report; -1: not there
  std::string state;            // task_state_name, or "not run"
  std::vector<std::string> models;
  std::vector<CurvePoint> curve;  // only points where the best changed, plus the last trial
};

struct JobReportModel {
  std::string name, path;
  std::string error;    // import failure; then nothing else is set
  int kernels = 0;      // template kernels
  int untuned = 0;      // kernels whose workload has no correct measurement
  int no_fallback = 0;  // kernels whose fallback config was not measured correctly
  double fallback_ms = 0, now_ms = 0;
  double previous_ms = -1;  // in the previous report; -1: not there
  // This run's in-graph step (the template kernels timed inside the compiled
  // model, autotune/model_steps.h); nullopt when it did not run for the model.
  std::optional<InGraphEstimate> in_graph;
  // Its rounds measured and planned: fewer where the time budget cut the step.
  size_t in_graph_rounds = 0, in_graph_rounds_planned = 0;
};

struct JobReport {
  std::string job_file, tuning_log, target_key, previous_report;
  int64_t started_unix = 0;
  double elapsed_s = 0;
  int64_t run_trials = 0;
  std::string stop_reason;
  int exit_status = 0;
  std::vector<JobReportTask> tasks;
  std::vector<JobReportModel> models;
  // Error class -> records of the job's workloads: this run, every run.
  std::map<std::string, int64_t> failures_run, failures_all;
};

// `previous` is an earlier report's JSON (job_report_json's or tune --report's
// format; only tasks[].workload/best_gflops and models[].name/estimated_ms are
// read), or null. `started_unix` splits this run's records from earlier ones.
JobReport make_job_report(const Job& job, const std::vector<JobModelWorkloads>& models,
                          const JobTasks& tasks, const TuneSummary& summary, const RecordDB& db,
                          const codegen::Target& target, const nlohmann::json& previous,
                          const std::string& previous_path, int64_t started_unix);

// What is left out of the models' estimated latency (the report prints it).
extern const char* const kLatencyNote;
// What the models' "in the model" column is.
extern const char* const kInGraphNote;

std::string job_report_json(const JobReport& r);
// One self-contained page: inline CSS and SVG, no script, no external file.
std::string job_report_html(const JobReport& r);

}  // namespace kiln::tuner
