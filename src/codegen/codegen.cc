// Driving LLVM: target machines, the O3 pipeline, the ORC JIT, object and
// shared-library emission.
#include "codegen/codegen.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "codegen/llvm_init.h"
#include "codegen/lower_llvm.h"
#include "runtime/cpu_features.h"
#include "support/output_file.h"
#include "support/process.h"
#include "support/temp_files.h"

namespace kiln::codegen {

namespace detail {

std::unique_ptr<llvm::TargetMachine> make_target_machine(const Target& target) {
  initialize_llvm();
  std::string err;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(target.triple, err);
  if (!t) throw std::runtime_error("codegen: no LLVM target for '" + target.triple + "': " + err);
  std::string features;
  for (size_t i = 0; i < target.features.size(); ++i)
    features += (i ? "," : "") + target.features[i];
  llvm::TargetOptions opts;
  // "armv7a-linux-gnueabihf" (no vendor) is what users and Debian write;
  // llvm::Triple's constructor would read "linux" as the vendor and lose the
  // OS and the hard-float environment, so the triple is normalized first (as
  // clang and llc do): a soft-float mod.so does not load into a hard-float
  // process.
  const std::string triple = llvm::Triple::normalize(target.triple);
  if (target.fast_math) {
    opts.UnsafeFPMath = true;
    opts.NoInfsFPMath = true;
    opts.NoNaNsFPMath = true;
    opts.AllowFPOpFusion = llvm::FPOpFusion::Fast;
  }
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(triple, target.cpu, features, opts,
                                                                 llvm::Reloc::PIC_, std::nullopt,
                                                                 llvm::CodeGenOpt::Aggressive));
  if (!tm) throw std::runtime_error("codegen: cannot create a target machine for " + target.str());
  return tm;
}

void optimize_module(llvm::Module& m, llvm::TargetMachine& tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(m, mam);
}

}  // namespace detail

namespace {

// Module built, verified and optimized; owns its context.
struct Built {
  std::unique_ptr<llvm::LLVMContext> ctx;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unique_ptr<llvm::Module> module;
};

Built build(const std::vector<ir::LoweredFunc>& funcs, const Target& target, bool optimize) {
  Built r;
  r.ctx = std::make_unique<llvm::LLVMContext>();
  r.tm = detail::make_target_machine(target);
  r.module = detail::lower_to_llvm(funcs, target, *r.tm, *r.ctx);
  if (optimize) detail::optimize_module(*r.module, *r.tm);
  return r;
}

std::string emit_file(Built& b, llvm::CodeGenFileType kind) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (b.tm->addPassesToEmitFile(pm, os, nullptr, kind))
    throw std::runtime_error("codegen: the target cannot emit this file type");
  pm.run(*b.module);
  return std::string(buf.begin(), buf.end());
}

// Each blob becomes `const uint8_t name[]` (64-byte aligned) and
// `const uint64_t name_size`, both exported.
void add_data_symbols(llvm::Module& m, const std::vector<DataSymbol>& data) {
  llvm::LLVMContext& ctx = m.getContext();
  for (const DataSymbol& d : data) {
    llvm::Constant* bytes =
        llvm::ConstantDataArray::getRaw(d.bytes, d.bytes.size(), llvm::Type::getInt8Ty(ctx));
    auto* gv = new llvm::GlobalVariable(m, bytes->getType(), true,
                                        llvm::GlobalValue::ExternalLinkage, bytes, d.name);
    gv->setAlignment(llvm::Align(64));
    auto* size = llvm::ConstantInt::get(llvm::Type::getInt64Ty(ctx), d.bytes.size());
    new llvm::GlobalVariable(m, size->getType(), true, llvm::GlobalValue::ExternalLinkage, size,
                             d.name + "_size");
  }
}

std::string error_text(llvm::Error e) { return llvm::toString(std::move(e)); }

}  // namespace

// ---- JIT ------------------------------------------------------------------------

struct JitModule::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::map<std::string, kiln_kernel_fn> functions;
};

JitModule::JitModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitModule::~JitModule() = default;

kiln_kernel_fn JitModule::get_function(const std::string& name) const {
  auto it = impl_->functions.find(name);
  if (it == impl_->functions.end())
    throw std::runtime_error("JIT module has no kernel named '" + name + "'");
  return it->second;
}

std::vector<std::string> JitModule::function_names() const {
  std::vector<std::string> names;
  for (const auto& kv : impl_->functions) names.push_back(kv.first);
  return names;
}

namespace {

// Generated code calls the kiln runtime and libm. The runtime's symbols are
// defined by address (so they resolve even if the process loaded the runtime
// RTLD_LOCAL); everything else comes from the process.
void add_runtime_symbols(llvm::orc::LLJIT& jit) {
  llvm::orc::JITDylib& jd = jit.getMainJITDylib();
  auto flags = llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable;
  llvm::orc::SymbolMap syms;
  syms[jit.mangleAndIntern("kiln_parallel_for")] =
      llvm::JITEvaluatedSymbol::fromPointer(&kiln_parallel_for, flags);
  syms[jit.mangleAndIntern("kiln_workspace_alloc")] =
      llvm::JITEvaluatedSymbol::fromPointer(&kiln_workspace_alloc, flags);
  syms[jit.mangleAndIntern("kiln_workspace_free")] =
      llvm::JITEvaluatedSymbol::fromPointer(&kiln_workspace_free, flags);
  if (auto err = jd.define(llvm::orc::absoluteSymbols(std::move(syms))))
    throw std::runtime_error("JIT: cannot define runtime symbols: " + error_text(std::move(err)));
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      jit.getDataLayout().getGlobalPrefix());
  if (!gen)
    throw std::runtime_error("JIT: cannot search the process: " + error_text(gen.takeError()));
  jd.addGenerator(std::move(*gen));
}

}  // namespace

std::unique_ptr<JitModule> jit_compile(const std::vector<ir::LoweredFunc>& funcs,
                                       const Target& target) {
  if (llvm::Triple(target.triple).getArch() !=
      llvm::Triple(llvm::sys::getProcessTriple()).getArch())
    throw std::runtime_error("JIT: target " + target.str() + " cannot run on this machine");
  Built b = build(funcs, target, true);

  llvm::orc::JITTargetMachineBuilder jtmb{llvm::Triple(target.triple)};
  jtmb.setCPU(target.cpu);
  jtmb.addFeatures(target.features);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
  jtmb.setRelocationModel(llvm::Reloc::PIC_);
  jtmb.getOptions() = b.tm->Options;
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create();
  if (!jit) throw std::runtime_error("JIT: cannot create LLJIT: " + error_text(jit.takeError()));
  add_runtime_symbols(**jit);
  b.module->setDataLayout((*jit)->getDataLayout());
  llvm::orc::ThreadSafeModule tsm(std::move(b.module), std::move(b.ctx));
  if (auto err = (*jit)->addIRModule(std::move(tsm)))
    throw std::runtime_error("JIT: cannot add module: " + error_text(std::move(err)));

  auto impl = std::make_unique<JitModule::Impl>();
  // Looking every kernel up now compiles the module here, not on first use.
  for (const ir::LoweredFunc& f : funcs) {
    auto addr = (*jit)->lookup(f.name);
    if (!addr)
      throw std::runtime_error("JIT: cannot compile '" + f.name +
                               "': " + error_text(addr.takeError()));
    impl->functions[f.name] = addr->toPtr<kiln_kernel_fn>();
  }
  impl->jit = std::move(*jit);
  return std::make_unique<JitModule>(std::move(impl));
}

// ---- text ---------------------------------------------------------------------------

std::string kernel_signature(const ir::LoweredFunc& f) {
  std::string s;
  for (size_t i = 0; i < f.args.size(); ++i) {
    const ir::Buffer& b = f.args[i];
    int64_t elements = 1;
    bool known = true;
    for (const ir::Expr& d : b->shape) {
      const int64_t* v = ir::as_const_int(d);
      if (!v) {
        known = false;
        break;
      }
      elements *= *v;
    }
    s += (i ? ";" : "") + b->dtype.str() + ":" + (known ? std::to_string(elements) : "?");
  }
  return s;
}

std::string emit_llvm_ir(const std::vector<ir::LoweredFunc>& funcs, const Target& target,
                         bool optimized) {
  Built b = build(funcs, target, optimized);
  std::string s;
  llvm::raw_string_ostream os(s);
  b.module->print(os, nullptr);
  return os.str();
}

std::string emit_assembly(const std::vector<ir::LoweredFunc>& funcs, const Target& target) {
  Built b = build(funcs, target, true);
  return emit_file(b, llvm::CGFT_AssemblyFile);
}

// ---- shared library --------------------------------------------------------------------

namespace {

namespace fs = std::filesystem;

}  // namespace

std::string compile_object(const std::vector<ir::LoweredFunc>& funcs, const Target& target) {
  Built b = build(funcs, target, true);
  return emit_file(b, llvm::CGFT_ObjectFile);
}

std::vector<CompiledKernel> compile_kernels(const std::vector<ir::LoweredFunc>& funcs,
                                            const Target& target, int threads) {
  std::vector<CompiledKernel> out(funcs.size());
  std::vector<std::exception_ptr> errors(funcs.size());
  std::atomic<size_t> next{0};
  // Each worker owns its LLVM contexts (one per kernel): LLVM is thread-safe
  // across contexts.
  // KILN_DEBUG_CODEGEN=1: a line per kernel as it starts and ends, so that a
  // kernel LLVM takes too long on can be named while it runs.
  const char* dbg = std::getenv("KILN_DEBUG_CODEGEN");
  const bool trace = dbg && *dbg && std::string(dbg) != "0";
  auto work = [&] {
    for (size_t i; (i = next++) < funcs.size();) {
      if (trace) std::fprintf(stderr, "[kiln codegen] start %s\n", funcs[i].name.c_str());
      auto start = std::chrono::steady_clock::now();
      try {
        out[i].name = funcs[i].name;
        out[i].object = compile_object({funcs[i]}, target);
      } catch (...) {
        errors[i] = std::current_exception();
      }
      out[i].seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (trace)
        std::fprintf(stderr, "[kiln codegen] done  %s %.3f s\n", funcs[i].name.c_str(),
                     out[i].seconds);
    }
  };
  size_t n = threads > 0 ? static_cast<size_t>(threads)
                         : std::max<size_t>(1, std::thread::hardware_concurrency());
  n = std::min(n, std::max<size_t>(1, funcs.size()));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

std::string data_object(const std::vector<DataSymbol>& data, const Target& target) {
  Built b;
  b.ctx = std::make_unique<llvm::LLVMContext>();
  b.tm = detail::make_target_machine(target);
  b.module = std::make_unique<llvm::Module>("kiln_data", *b.ctx);
  b.module->setTargetTriple(b.tm->getTargetTriple().str());
  b.module->setDataLayout(b.tm->createDataLayout());
  add_data_symbols(*b.module, data);
  return emit_file(b, llvm::CGFT_ObjectFile);
}

namespace {

// The first of `names` found on PATH, else the first name (the error then says
// that it could not be started).
std::string find_program(const std::vector<std::string>& names) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin");
  std::vector<std::string> folders;
  for (std::string d; std::getline(dirs, d, ':');) folders.push_back(d);
  for (const std::string& n : names)
    for (const std::string& d : folders)
      if (::access((d + "/" + n).c_str(), X_OK) == 0) return n;
  return names.front();
}

// The link command's head: argv up to and including "-o" (the output follows).
std::vector<std::string> linker_for(const Target& target) {
  if (target.arch() == runtime::host_arch()) {
    const char* cc = std::getenv("CC");
    return {cc && *cc ? cc : "cc", "-shared", "-o"};
  }
  const char* lld = std::getenv("KILN_LINKER");
  return {lld && *lld ? std::string(lld) : find_program({"ld.lld-16", "ld.lld"}), "-shared", "-o"};
}

}  // namespace

void link_shared_library(const std::vector<std::string>& objects, const std::string& path,
                         const Target& target) {
  support::TempDir dir("link");  // the objects; removed on return and by kiln's signal handler
  std::vector<std::string> argv = linker_for(target);
  argv.push_back("");  // the output, set below
  for (size_t i = 0; i < objects.size(); ++i) {
    fs::path obj_path = dir.path() / ("part" + std::to_string(i) + ".o");
    std::ofstream out(obj_path, std::ios::binary);
    out.write(objects[i].data(), static_cast<std::streamsize>(objects[i].size()));
    if (!out) throw std::runtime_error("cannot write " + obj_path.string());
    argv.push_back(obj_path.string());
  }
  // libm resolves at load time either way; ld.lld links without a sysroot.
  if (target.arch() == runtime::host_arch()) argv.push_back("-lm");
  // Link next to the destination (a symlink's target), then rename: readers
  // never see a partial file. A device or FIFO gets the finished library
  // (support/output_file.h).
  support::OutputTarget dest = support::resolve_output(path);
  support::TempFile tmp(support::output_temp_path(dest));  // removed unless moved into place
  argv[linker_for(target).size()] = tmp.path().string();
  support::ProcessResult r = support::run_process(argv);
  bool ok = r.spawn_error.empty() && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0;
  if (!ok) {
    int rc = r.spawn_error.empty() && WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1;
    throw std::runtime_error("linking " + path + " failed (exit " + std::to_string(rc) +
                             "): " + (r.spawn_error.empty() ? r.out + r.err : r.spawn_error));
  }
  support::commit_output(tmp.path().string(), dest);
}

void build_shared_library(const std::vector<ir::LoweredFunc>& funcs, const Target& target,
                          const std::string& path, const std::vector<DataSymbol>& data) {
  std::vector<std::string> objects = {compile_object(funcs, target)};
  if (!data.empty()) objects.push_back(data_object(data, target));
  link_shared_library(objects, path, target);
}

}  // namespace kiln::codegen
