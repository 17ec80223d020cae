// `kiln tune --job` as cron runs it: two tiny models sharing a convolution
// are one job (the shared workload is one task), each model gets the
// in-graph step after the search, a re-run measures nothing again, the exit status tells done (0),
// budget spent (3) and a model that failed to import (4, the rest still tuned) apart, a malformed
// job file is one error naming the file and line, a worker joins through the database, and the HTML
// report renders in headless Chromium with a curve per chart.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "driver_harness.h"
#include "tuner/records.h"

namespace kiln::test {
namespace {

// x[1, 8, 6, 6] -> Conv 3x3 (8 -> 16) -> Relu [-> Conv 3x3 (16 -> 8) -> Relu] -> y.
// Both models have the first convolution: one workload, one task. (Fewer
// than 16 channels on one side: neither convolution has a Winograd
// alternative, so each is one task.)
OnnxBuilder tiny_model(bool second_conv) {
  std::mt19937 rng(3);
  OnnxBuilder b;
  b.input("x", {"1", "8", "6", "6"});
  b.output("y", {"1", second_conv ? "8" : "16", "6", "6"});
  conv(b, "conv1", "x", "c1", {8, 16}, rng);
  if (!second_conv) {
    b.node("Relu", "relu1", {"c1"}, {"y"});
    return b;
  }
  b.node("Relu", "relu1", {"c1"}, {"r1"});
  conv(b, "conv2", "r1", "c2", {16, 8}, rng);
  b.node("Relu", "relu2", {"c2"}, {"y"});
  return b;
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

class KilnTuneJob : public ::testing::Test {
 protected:
  CommandResult kiln(const std::string& args, const ScratchDir* capture = nullptr) {
    return run_kiln(args, tmp_, capture ? *capture : capture_,
                    "KILN_LOGS_DIR='" + logs_.path().string() + "'");
  }
  // Quick measurements: the point is the bookkeeping, not the timing.
  static std::string quick() { return " --repeat 1 --min-repeat-ms 0"; }
  // A job over tiny_a (trials 5) and tiny_b (the job's 3) and `extra` models.
  std::string write_job(const std::string& extra = "") {
    std::string path = work_.file("nightly.toml");
    write_bytes(path,
                "# the test's job\n"
                "tuning_log = \"tuning.db\"\n"
                "tuner = \"random\"\n"
                "trials = 3\n"
                "batch = 3\n"
                "report = [\"report.html\", \"report.json\"]\n\n"
                "[[model]]\nname = \"tiny_a\"\npath = \"a.onnx\"\ntrials = 5\n\n"
                "[[model]]\nname = \"tiny_b\"\npath = \"b.onnx\"\npriority = 2\n" +
                    extra);
    return path;
  }
  nlohmann::json report_json() {
    return nlohmann::json::parse(read_bytes(work_.file("report.json")));
  }
  void SetUp() override {
    write_bytes(work_.file("a.onnx"), tiny_model(false).bytes());
    write_bytes(work_.file("b.onnx"), tiny_model(true).bytes());
  }
  ScratchDir work_, tmp_, capture_, logs_;
};

bool is_in_graph_key(const std::string& target_key) {
  return target_key.find("; measured=in-graph") != std::string::npos;
}

// The search's records per workload in the job's database (the in-graph
// step's, under their own target key, with `in_graph`).
std::map<std::string, size_t> records_by_workload(const std::string& db_path,
                                                  std::set<std::string>* configs = nullptr,
                                                  size_t* total = nullptr, bool in_graph = false) {
  tuner::RecordDB db = tuner::RecordDB::open(db_path, tuner::RecordDB::Mode::kMustExist);
  std::map<std::string, size_t> out;
  for (const std::string& t : db.targets())
    if (is_in_graph_key(t) == in_graph)
      for (const std::string& w : db.workloads(t))
        for (const tuner::Record& r : db.records(w, t)) {
          ++out[w];
          if (configs) configs->insert(w + " " + r.config_json);
          if (total) ++*total;
        }
  return out;
}

TEST_F(KilnTuneJob, DeduplicatesResumesAndReports) {
  std::string job = write_job();
  CommandResult r = kiln("tune --job " + quote(job) + quick());
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("2 models (0 failed to import), 3 kernels, 2 tasks (1 shared"),
            std::string::npos)
      << r.out;
  // The shared convolution is one task capped at the larger of the models' trials (5);
  // tiny_b's own convolution gets the job's 3.
  std::map<std::string, size_t> per = records_by_workload(work_.file("tuning.db"));
  ASSERT_EQ(per.size(), 2u);
  std::multiset<size_t> counts;
  for (const auto& kv : per) counts.insert(kv.second);
  EXPECT_EQ(counts, (std::multiset<size_t>{3, 5}));

  nlohmann::json rep = report_json();
  ASSERT_EQ(rep["tasks"].size(), 2u);
  EXPECT_EQ(rep["tasks"][0]["models"], (nlohmann::json{"tiny_a", "tiny_b"}));
  EXPECT_EQ(rep["tasks"][0]["count"], 2);
  EXPECT_EQ(rep["tasks"][0]["trials"], 5);
  EXPECT_EQ(rep["tasks"][1]["models"], (nlohmann::json{"tiny_b"}));
  EXPECT_EQ(rep["trials"], 8);
  EXPECT_EQ(rep["exit_status"], 0);
  EXPECT_EQ(rep["previous_report"], "");
  ASSERT_EQ(rep["models"].size(), 2u);
  for (const auto& m : rep["models"]) {
    EXPECT_GT(m["estimated_ms"].get<double>(), 0) << m;
    EXPECT_GT(m["fallback_ms"].get<double>(), 0) << m;  // the fallback is measured first
    EXPECT_LE(m["estimated_ms"].get<double>(), m["fallback_ms"].get<double>()) << m;
    EXPECT_EQ(m["untuned"], 0);
  }
  // The in-graph step ran for both models: both workloads have in-graph
  // records, and each model's kernels were timed inside it, tuned and untuned.
  EXPECT_EQ(records_by_workload(work_.file("tuning.db"), nullptr, nullptr, true).size(), 2u);
  EXPECT_NE(r.out.find("in-graph records for 2 workloads"), std::string::npos) << r.out;
  for (const auto& m : rep["models"]) {
    ASSERT_TRUE(m.contains("in_graph")) << m;
    EXPECT_EQ(m["in_graph"]["kernels"], m["kernels"]) << m;
    EXPECT_GT(m["in_graph"]["tuned_ms"].get<double>(), 0) << m;
    EXPECT_GT(m["in_graph"]["untuned_ms"].get<double>(), 0) << m;
    EXPECT_GE(m["in_graph"]["rounds"].get<int>(), 1) << m;
    EXPECT_EQ(m["in_graph"]["rounds"], m["in_graph"]["rounds_planned"]) << "no budget: all rounds";
  }
  // tiny_b's estimate: its two kernels' best times.
  double b_ms = rep["tasks"][0]["best_ms"].get<double>() + rep["tasks"][1]["best_ms"].get<double>();
  EXPECT_NEAR(rep["models"][1]["estimated_ms"].get<double>(), b_ms, 1e-9);

  // Again: everything is measured, nothing is measured again; the JSON report
  // of the first run is the previous report.
  r = kiln("tune --job " + quote(job) + quick());
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("0 trials in"), std::string::npos) << r.out;
  EXPECT_EQ(records_by_workload(work_.file("tuning.db")), per);
  rep = report_json();
  EXPECT_EQ(rep["trials"], 0);
  EXPECT_EQ(rep["previous_report"], work_.file("report.json"));
  EXPECT_EQ(rep["tasks"][0]["previous_gflops"], rep["tasks"][0]["best_gflops"]);

  // The HTML page as a browser sees it.
  std::string dom_file = work_.file("dom.html");
  ScratchDir profile;
  std::string cmd = "chromium --headless --no-sandbox --disable-gpu --user-data-dir='" +
                    profile.path().string() + "' --dump-dom 'file://" + work_.file("report.html") +
                    "' >'" + dom_file + "' 2>/dev/null";
  int status = std::system(cmd.c_str());
  std::string dom = read_bytes(dom_file);
  if (status != 0 || dom.find("<html") == std::string::npos)
    GTEST_SKIP() << "chromium cannot run here (status " << status << "): the report's rendering "
                 << "was not checked; install Debian's chromium (scripts/install-deps.sh)";
  for (const std::string& text :
       {std::string("tiny_a"), std::string("tiny_b"),
        std::string("conv2d_NCHWc.x86(data=[1,8,6,6]"), std::string("Failures by error class"),
        std::string("best GFLOP/s by time"), std::string("in the model: tuned / untuned")})
    EXPECT_NE(dom.find(text), std::string::npos) << text;
  // The page's numbers: each task's trials, each model's estimate.
  EXPECT_NE(dom.find("5 of 5 trials"), std::string::npos);
  EXPECT_NE(dom.find("3 of 3 trials"), std::string::npos);
  // (the page writes times under 0.1 ms in microseconds)
  double b_est = rep["models"][1]["estimated_ms"].get<double>();
  char buf[64];
  if (b_est >= 0.1)
    std::snprintf(buf, sizeof buf, "<td>%.3f ms</td>", b_est);
  else
    std::snprintf(buf, sizeof buf, "<td>%.2f us</td>", b_est * 1000);
  EXPECT_NE(dom.find(buf), std::string::npos) << buf;
  // Two charts per task, one curve in each.
  EXPECT_EQ(count_of(dom, "<svg class=\"chart\""), 4u);
  EXPECT_EQ(count_of(dom, "<polyline class=\"curve\""), 4u);
}

TEST_F(KilnTuneJob, ExitStatusesForCron) {
  // Budget spent before the trials: 3.
  std::string job = write_job();
  CommandResult r = kiln("tune --job " + quote(job) + quick() + " --time-budget 0.000001");
  EXPECT_EQ(r.status, 3) << r.err << r.out;
  EXPECT_EQ(report_json()["exit_status"], 3);

  // A model that does not import is named; the others are tuned; 4 at the end.
  write_bytes(work_.file("broken.onnx"), "not a model");
  job = write_job("\n[[model]]\nname = \"broken\"\npath = \"broken.onnx\"\n");
  r = kiln("tune --job " + quote(job) + quick());
  EXPECT_EQ(r.status, 4) << r.err << r.out;
  EXPECT_NE(r.err.find("model 'broken' (" + work_.file("broken.onnx") + ") failed to import"),
            std::string::npos)
      << r.err;
  size_t total = 0;
  records_by_workload(work_.file("tuning.db"), nullptr, &total);
  EXPECT_EQ(total, 8u);
  nlohmann::json rep = report_json();
  EXPECT_EQ(rep["exit_status"], 4);
  EXPECT_TRUE(rep["models"][2].contains("error"));
  EXPECT_EQ(rep["failures_this_run"]["import_error"], 1);

  // A malformed job file: one error naming the file and line; nothing written.
  ScratchDir other;
  std::string bad = other.file("bad.toml");
  write_bytes(bad, "tuning_log = \"t.db\"\ntrials = = 3\n[[model]]\npath = \"a.onnx\"\n");
  r = kiln("tune --job " + quote(bad));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find(bad + ":2:"), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "\n"), 1u) << r.err;
  EXPECT_FALSE(fs::exists(other.file("t.db")));
  // Checked before any tuning, nothing created: an unreadable --previous-report, a
  // report into a missing folder.
  std::string job2 = other.file("job.toml");
  write_bytes(job2, "tuning_log = \"t.db\"\n[[model]]\npath = \"" + work_.file("a.onnx") + "\"\n");
  r = kiln("tune --job " + quote(job2) + " --previous-report " + quote(other.file("old.json")));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot read previous report '" + other.file("old.json") + "'"),
            std::string::npos)
      << r.err;
  r = kiln("tune --job " + quote(job2) + " --report " + quote(other.file("no/dir/r.html")));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot write report"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(other.file("t.db")));
  // Every model broken: still 4, and the report says so.
  write_bytes(job2, "tuning_log = \"t.db\"\nreport = \"r.json\"\n[[model]]\npath = \"" +
                        work_.file("broken.onnx") + "\"\n");
  r = kiln("tune --job " + quote(job2));
  EXPECT_EQ(r.status, 4) << r.err << r.out;
  nlohmann::json broken = nlohmann::json::parse(read_bytes(other.file("r.json")));
  EXPECT_EQ(broken["tasks"].size(), 0u);
  EXPECT_EQ(broken["failures_this_run"]["import_error"], 1);
  // --worker writes no report.
  r = kiln("tune --worker --job " + quote(job) + " --report " + quote(other.file("r.html")));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--worker writes no report"), std::string::npos) << r.err;
}

// Issue 65 #8, #9, #17: a report path that is one of the run's inputs -- the
// job file, a model, a tuning log or the -wal/-shm file sqlite keeps beside
// it, existing or not yet created -- or that cannot be written (/proc) is
// refused before any tuning: one error, exit 1, no database, the inputs
// untouched.
TEST_F(KilnTuneJob, ReportPathsThatAreInputsOrUnwritableAreRefused) {
  std::string job = write_job();
  const std::string job_text = read_bytes(job);
  const std::string model_a = read_bytes(work_.file("a.onnx"));
  const std::string db = work_.file("tuning.db");  // the job's tuning_log, not created yet
  auto refused = [&](const std::string& args, const std::string& what) {
    SCOPED_TRACE(args);
    CommandResult r = kiln(args + quick());
    EXPECT_EQ(r.status, 1) << r.err << r.out;
    EXPECT_NE(r.err.find("cannot write report '"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("kiln tune --job"), std::string::npos) << "tuning started:\n" << r.out;
    EXPECT_FALSE(fs::exists(db));
    EXPECT_EQ(read_bytes(job), job_text);
    EXPECT_EQ(read_bytes(work_.file("a.onnx")), model_a);
  };
  // #8: the job file, on the command line, inside the job, through a link.
  refused("tune --job " + quote(job) + " --report " + quote(job), "the job file");
  fs::create_symlink(job, work_.file("job-link.json"));
  refused("tune --job " + quote(job) + " --report " + quote(work_.file("job-link.json")),
          "the job file");
  ScratchDir other;
  std::string job2 = other.file("self.toml");
  std::string job2_text = "tuning_log = \"" + db +
                          "\"\nreport = \"self.toml\"\n[[model]]\npath = \"" +
                          work_.file("a.onnx") + "\"\n";
  write_bytes(job2, job2_text);
  refused("tune --job " + quote(job2), "the job file");
  EXPECT_EQ(read_bytes(job2), job2_text);
  // A model the job names.
  refused("tune --job " + quote(job) + " --report " + quote(work_.file("b.onnx")), "the model");
  // #9: the tuning log that does not exist yet, its -wal and -shm, in the job
  // or on the command line, spelled another way.
  refused("tune --job " + quote(job) + " --report " + quote(db), "the tuning log");
  refused("tune --job " + quote(job) + " --report " + quote(db + "-wal"), "the '-wal' file of");
  refused("tune --job " + quote(job) + " --report " + quote(work_.file("./tuning.db-shm")),
          "the '-shm' file of");
  std::string new_db = work_.file("new.db");
  refused("tune --job " + quote(job) + " --tuning-log " + quote(new_db) + " --report " +
              quote(work_.file("sub/../new.db")),
          "the tuning log");
  EXPECT_FALSE(fs::exists(new_db));
  // Without a job: the same check.
  refused("tune " + quote(work_.file("a.onnx")) + " --tuning-log " + quote(new_db) + " --report " +
              quote(new_db + "-wal"),
          "the '-wal' file of");
  EXPECT_FALSE(fs::exists(new_db));
  // #17: a folder no file can be created in (/proc, even for root) fails now,
  // with the reason, not after the tuning.
  refused("tune --job " + quote(job) + " --report /proc/kiln-report.json",
          "cannot create a file in '/proc': ");
}

// Issue 65 #14: a bad input_shapes string is the job file's error (FILE:LINE,
// exit 1, no database), not a model that failed to import (exit 4); `--job .`
// says it is a folder.
TEST_F(KilnTuneJob, BadInputShapesAndAFolderAreTheJobFilesErrors) {
  std::string job = write_job("input_shapes = \"x[1,8,6,6]\"\n");  // tiny_b's, line 17
  CommandResult r = kiln("tune --job " + quote(job) + quick());
  EXPECT_EQ(r.status, 1) << r.err << r.out;
  EXPECT_EQ(r.err.find("failed to import"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(job + ":17:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("input_shapes"), std::string::npos) << r.err;
  EXPECT_EQ(count_of(r.err, "\n"), 1u) << r.err;
  EXPECT_FALSE(fs::exists(work_.file("tuning.db")));
  r = kiln("tune --job " + quote(work_.path().string()) + quick());
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("it is a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no [[model]]"), std::string::npos) << r.err;
}

TEST_F(KilnTuneJob, AWorkerSharesTheJob) {
  std::string job = write_job();
  ScratchDir capture_w;
  CommandResult main_run, worker;
  std::thread tm([&] { main_run = kiln("tune --job " + quote(job) + quick()); });
  std::thread tw([&] { worker = kiln("tune --worker --job " + quote(job) + quick(), &capture_w); });
  tm.join();
  tw.join();
  ASSERT_EQ(main_run.status, 0) << main_run.err << main_run.out;
  ASSERT_EQ(worker.status, 0) << worker.err << worker.out;
  EXPECT_NE(worker.out.find("(worker)"), std::string::npos) << worker.out;
  std::set<std::string> configs;
  size_t total = 0;
  records_by_workload(work_.file("tuning.db"), &configs, &total);
  EXPECT_EQ(configs.size(), total) << "a config was measured twice";
  EXPECT_LE(total, 8u);  // the job's trials, shared between the two, no overshoot
  EXPECT_GE(total, 6u);
}

}  // namespace
}  // namespace kiln::test
