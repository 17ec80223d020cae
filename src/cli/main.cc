// The kiln command.
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/build_command.h"
#include "cli/demo.h"
#include "cli/quantize_command.h"
#include "cli/records_command.h"
#include "cli/run_command.h"
#include "cli/target_command.h"
#include "cli/tasks_command.h"
#include "cli/tune_command.h"
#include "support/temp_files.h"
#include "support/version.h"

namespace {

const char* kUsage =
    "usage: kiln <command> [options]\n"
    "\n"
    "commands:\n"
    "  run MODEL.tar --inputs INPUT.npz [--output OUT.npz] [--repeat N] [--print-time]\n"
    "      [--profile]     run a package (.tar or self-contained .so) on the arrays of\n"
    "                      INPUT.npz named by the model's inputs; outputs go to OUT.npz\n"
    "                      as output_0, output_1, ...\n"
    "  demo [--print-ir] [--print-asm]\n"
    "                      compile, verify and time a dense and a conv2d kernel\n"
    "  build MODEL.onnx [-o OUT] [--target T] [--input-shapes S] [--output-format tar|so]\n"
    "                      [--config FILE]\n"
    "                      compile an ONNX model into a package (kiln build --help)\n"
    "  quantize MODEL.onnx -o OUT.onnx --calibration DATA [--calibrate max|percentile|kl]\n"
    "      [--keep-float NODE...]\n"
    "                      post-training int8 quantization into a QDQ ONNX model\n"
    "                      (kiln quantize --help)\n"
    "  tune MODEL.onnx [MORE.onnx ...] --tuning-log DB [--trials N] [--tuner xgb|random|grid|ga]\n"
    "                      search the models' workloads, store every measurement (kiln tune "
    "--help)\n"
    "  tasks MODEL.onnx [MORE.onnx ...] [--input-shapes S] [--tuning-log DB]\n"
    "                      list the models' tuning tasks (kiln tasks --help)\n"
    "  records export DB -o OUT.jsonl [--workload KEY]\n"
    "  records import DB IN.jsonl\n"
    "                      move tuning records between databases as JSON lines\n"
    "  target [--target T] what kiln compiles for: ISA class, vector width and registers,\n"
    "                      caches, required CPU features (this machine by default)\n"
    "  version             print kiln's version\n"
    "  help                this text\n";

}  // namespace

int main(int argc, char** argv) {
  // Ctrl-C, SIGTERM, SIGHUP: kiln's temporaries (support/temp_files.h) are
  // removed, then kiln ends by the signal.
  kiln::support::install_cleanup_handlers();
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string cmd = argv[1];
  std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    if (cmd == "demo") return kiln::cli::run_demo(rest);
    if (cmd == "build") return kiln::cli::run_build(rest);
    if (cmd == "run") return kiln::cli::run_run(rest);
    if (cmd == "tune") return kiln::cli::run_tune(rest);
    if (cmd == "tasks") return kiln::cli::run_tasks(rest);
    if (cmd == "target") return kiln::cli::run_target(rest);
    if (cmd == "records") return kiln::cli::run_records(rest);
    if (cmd == "quantize") return kiln::cli::run_quantize(rest);
    if (cmd == "version" || cmd == "--version") {
      std::printf("kiln %s\n", kiln::kiln_version());
      return 0;
    }
    if (cmd == "help" || cmd == "--help" || cmd == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::fprintf(stderr, "kiln: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
