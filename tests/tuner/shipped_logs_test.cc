// The pre-tuned logs kiln ships (logs/*.jsonl): every record parses, names a
// template kiln has, and some record of each workload is a legal point of
// that template's space, so a build can use it; each file holds records of
// its ISA class only, and a CPU model's file (<class>.<cpu>.jsonl) only
// records measured on that CPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "codegen/target.h"
#include "tuner/target_key.h"
#include "tuner/tuned_configs.h"

namespace kiln::tuner {
namespace {

TEST(ShippedLogs, EveryWorkloadHasAUsableRecordOfItsClassAndCpu) {
  namespace fs = std::filesystem;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(KILN_SHIPPED_LOGS_DIR)) {
    if (entry.path().extension() != ".jsonl") continue;
    ++files;
    std::string stem = entry.path().stem().string();
    std::string cls = stem.substr(0, stem.find('.'));
    std::string cpu = stem.find('.') == std::string::npos ? "" : stem.substr(stem.find('.') + 1);
    RecordSource src = load_jsonl(entry.path().string(), 2);
    EXPECT_FALSE(src.by_workload.empty()) << entry.path();
    for (const auto& [workload, records] : src.by_workload) {
      EXPECT_TRUE(pick_best(workload, records).has_value())
          << entry.path() << ": no usable record of " << workload;
      for (const Record& r : records) {
        TargetKey key = TargetKey::parse(r.target_key);
        // With the key's features: a -mcpu=generic record's ISA is in them.
        codegen::Target target = codegen::Target::parse(key.codegen_target());
        EXPECT_EQ(isa_class(target), cls) << entry.path() << ": " << r.target_key;
        // Measured on that CPU: its -mcpu, or "generic" for a model LLVM 16
        // does not know and kiln names itself (codegen::cpu_model_name).
        if (!cpu.empty()) {
          EXPECT_TRUE(target.cpu == cpu || (target.cpu == "generic" &&
                                            codegen::cpu_models_llvm_calls_generic().count(cpu)))
              << entry.path() << ": " << r.target_key;
        }
      }
    }
  }
  EXPECT_GE(files, 3);
}

}  // namespace
}  // namespace kiln::tuner
