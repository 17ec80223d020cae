// kiln.records: a tuning records database (tuner::RecordDB), the queries
// `kiln records` and `kiln tasks` make, and the target key this machine's
// builds look records up by.
#include "tuner/records.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "python/bindings.h"
#include "runtime/c_runtime_api.h"
#include "support/output_file.h"
#include "support/same_file.h"
#include "tuner/target_key.h"
#include "tuner/tuned_configs.h"

namespace kiln::python {
namespace {

// A record as its JSON line's fields (python/kiln/records.py makes a Record of it).
py::dict to_dict(const tuner::Record& r) {
  py::dict d;
  d["workload"] = r.workload_key, d["target"] = r.target_key, d["config"] = r.config_json;
  d["times_ms"] = r.times_ms, d["error"] = tuner::to_string(r.error);
  d["error_message"] = r.error_message, d["timestamp"] = r.timestamp_unix;
  d["kiln_version"] = r.kiln_version, d["gflops"] = r.gflops, d["mean_ms"] = r.mean_ms();
  return d;
}

py::list to_list(const std::vector<tuner::Record>& rs) {
  py::list out;
  for (const auto& r : rs) out.append(to_dict(r));
  return out;
}

std::string target_key(const std::string& target) {
  codegen::Target t = target.empty() ? codegen::Target::host() : codegen::Target::parse(target);
  return tuner::TargetKey::for_target(t, kiln_get_num_threads()).key();
}

// What kiln records export and kiln tune --report check before writing
// `path`: it is not one of the inputs, nor one of the sqlite `databases` or
// the -wal/-shm files beside them (existing or not), nor a read-only file,
// and a file can be created where it goes (support/output_file.h: /proc fails
// here, with the reason, not after the tuning).
void check_output(const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& inputs,
                  const std::vector<std::string>& databases) {
  support::refuse_output_over_input(path, inputs);
  for (const std::string& db : databases)
    support::refuse_output_over_database(path, "the tuning log", db);
  support::refuse_read_only_output(path);
  support::check_output_writable(path);
}

// JSON lines of the records a build would pick per workload and target (and
// the fastest), as `kiln records export --best` writes them.
std::string best_jsonl(const tuner::RecordDB& db, const std::string& workload) {
  std::string text;
  for (const tuner::Record& r : tuner::best_records(db))
    if (workload.empty() || r.workload_key == workload)
      text += tuner::record_to_json_line(r) + "\n";
  return text;
}

}  // namespace

void bind_records(py::module_& m) {
  using tuner::RecordDB;
  py::class_<RecordDB>(m, "RecordDB")
      .def(py::init([](const std::string& path, bool create) {
             return std::make_unique<RecordDB>(RecordDB::open(
                 path, create ? RecordDB::Mode::kCreate : RecordDB::Mode::kMustExist));
           }),
           py::arg("path"), py::arg("create"))
      .def_property_readonly("path", &RecordDB::path)
      .def("count", &RecordDB::count)
      .def("targets", &RecordDB::targets)
      .def("workloads", &RecordDB::workloads, py::arg("target"))
      .def("records", [](const RecordDB& db, const std::string& w,
                         const std::string& t) { return to_list(db.records(w, t)); })
      .def("best",
           [](const RecordDB& db, const std::string& w, const std::string& t) -> py::object {
             auto r = db.best(w, t);
             return r ? py::object(to_dict(*r)) : py::object(py::none());
           })
      .def("best_records", [](const RecordDB& db) { return to_list(tuner::best_records(db)); })
      .def("best_jsonl", &best_jsonl, py::arg("workload"))
      // kiln records export --best: written the way every output file is (support/output_file.h:
      // a symlink followed, a device or FIFO written through, never replaced by a file).
      .def(
          "export_best_jsonl",
          [](const RecordDB& db, const std::string& path, const std::string& workload) {
            check_output(path, {{"the database", db.path()}}, {});
            std::string text = best_jsonl(db, workload);
            support::write_output_file(path, text);
            return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
          },
          py::arg("path"), py::arg("workload"))
      .def("export_jsonl",
           [](const RecordDB& db, const std::string& path, const std::string& workload) {
             check_output(path, {{"the database", db.path()}}, {});
             return db.export_jsonl(path, workload);
           })
      .def("import_jsonl", &RecordDB::import_jsonl, py::arg("path"),
           py::call_guard<py::gil_scoped_release>());
  m.def("target_key", &target_key, py::arg("target"));
  m.def("check_output", &check_output, py::arg("path"), py::arg("inputs"),
        py::arg("databases") = std::vector<std::string>{});
}

}  // namespace kiln::python
