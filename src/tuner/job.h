// A nightly tuning job: several models tuned together as one run of the task
// scheduler (`kiln tune --job nightly.toml`, docs/nightly.md).
//
// The job file is TOML (toml++):
//
//   tuning_log  = "tuning.db"          # relative paths: to the job file's folder
//   target      = "llvm -mcpu=znver4"  # optional; default: this machine
//   trials      = 200                  # per task, default for every model
//   time_budget = 3600                 # seconds for the whole job; 0: none
//   tuner = "xgb"   batch = 16   early_stopping = 0
//   report = ["report.html", "report.json"]
//
//   [[model]]
//   name = "resnet18"                  # default: the file's stem
//   path = "models/resnet18.onnx"
//   input_shapes = "input:[1,3,224,224]"
//   trials = 400                       # overrides the job's `trials`
//   priority = 2                       # its workloads count twice in the scheduler
//
// The tuner tunes workloads, not files: this header parses the job and turns
// the models' workload lists (which the CLI gets from the build driver) into
// one deduplicated task list; it never opens a model.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tuner/tasks.h"

namespace kiln::tuner {

struct JobModel {
  std::string name;          // unique within the job
  std::string path;          // absolute, or relative to the working directory
  std::string input_shapes;  // `--input-shapes` syntax, may be empty
  int64_t trials = 0;        // per task; 0: the job's
  int priority = 1;          // >= 1: multiplies the model's kernel counts for the scheduler
};

struct Job {
  std::string file;        // the job file as given
  std::string tuning_log;  // resolved against the job file's folder; may be empty
  std::string target;      // empty: this machine
  std::string tuner = "xgb";
  int64_t trials = 64;
  double time_budget_s = 0;
  int batch = 16;
  int early_stopping = 0;
  std::vector<std::string> reports;  // resolved; .html -> HTML, anything else JSON
  std::vector<JobModel> models;
};

// Checks a model's `input_shapes` text (the CLI passes the frontend's
// --input-shapes parser: the tuner never parses models); throws with the reason.
using InputShapesCheck = std::function<void(const std::string&)>;

// Parses a job file. Any error -- unreadable file or a folder, TOML syntax,
// unknown key, wrong type, bad value (priority outside 1..1000, a time_budget
// that is negative or not finite, input_shapes that `check_input_shapes`
// refuses), no model, duplicate model name -- throws one std::runtime_error
// "FILE:LINE:COLUMN: what is wrong" (line and column where the file has them).
Job parse_job_file(const std::string& path, const InputShapesCheck& check_input_shapes = {});
// The same for text already read; `file` names it in errors and relative
// paths are taken against its folder.
Job parse_job(const std::string& toml_text, const std::string& file,
              const InputShapesCheck& check_input_shapes = {});

// A model of the job once its file was imported (or not).
struct JobModelWorkloads {
  const JobModel* model = nullptr;
  std::vector<std::string> workload_keys;  // every implementation of every template kernel
  std::string error;                       // non-empty: the model failed to import; no keys
  // Per template kernel, its implementations' keys (the untuned build's first;
  // driver::template_workload_sets): the model's estimated latency counts
  // the fastest measured one once. Empty: each key of workload_keys alone.
  std::vector<std::vector<std::string>> kernels;
};

// The job's tasks: one per distinct workload over every imported model (the
// same workload in two models is one task). count is the number of kernels
// using it over all models (for the report); weight uses counts multiplied by
// each model's priority, and so does the scheduler, through `sched_tasks`
// (count x priority). trials[i] is the largest `trials` among the models
// using task i.
struct JobTasks {
  std::vector<Task> tasks;        // true counts
  std::vector<Task> sched_tasks;  // counts multiplied by priority: what the scheduler weighs
  std::vector<int64_t> trials;
  // models_of[i]: indices into the model list of the models using task i.
  std::vector<std::vector<size_t>> models_of;
};
JobTasks make_job_tasks(const Job& job, const std::vector<JobModelWorkloads>& models);

}  // namespace kiln::tuner
