// Code generation: kiln's loop IR -> LLVM IR -> native code.
//
// Each LoweredFunc becomes `extern "C" int32_t name(void** args)` (see
// runtime/c_runtime_api.h), returning 0 on success. Kernels call only the kiln
// runtime (kiln_parallel_for, kiln_workspace_alloc/free) and libm.
// This header is LLVM-free; errors are std::runtime_error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "ir/function.h"
#include "runtime/c_runtime_api.h"

namespace kiln::codegen {

// Kernels compiled in memory (ORC LLJIT); the code lives as long as this object.
class JitModule {
 public:
  ~JitModule();
  JitModule(const JitModule&) = delete;
  JitModule& operator=(const JitModule&) = delete;

  // The kernel called `name`; throws std::runtime_error if there is none.
  kiln_kernel_fn get_function(const std::string& name) const;
  std::vector<std::string> function_names() const;

  struct Impl;
  explicit JitModule(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Compiles funcs (optimized at O3) for target, which must be the host's ISA or
// a subset of it.
std::unique_ptr<JitModule> jit_compile(const std::vector<ir::LoweredFunc>& funcs,
                                       const Target& target);

// Writes a shared library exporting one symbol per kernel. Runtime symbols stay
// undefined and resolve when the loading process (linking libkiln_runtime.so)
// dlopens it. Written atomically: on failure no file is left at `path`.
// data: bytes to embed as exported read-only symbols `name` (uint8_t[]) and
// `name_size` (uint64_t) — a self-contained package carries its graph and
// weights this way.
// A kernel's argument signature, "DTYPE:ELEMENTS;..." per argument in order
// ("float32:150528;float32:36864;float32:200704"; "DTYPE:?" for a buffer
// whose shape is not constant). Every compiled kernel `NAME` comes with a
// constant NUL-terminated string `NAME_signature` holding it, so that the
// runtime can check a package's mod.json against the code it calls before
// running anything (a kernel given fewer or smaller buffers than it was
// compiled for would write past them).
std::string kernel_signature(const ir::LoweredFunc& f);

struct DataSymbol {
  std::string name;
  std::string bytes;
};
void build_shared_library(const std::vector<ir::LoweredFunc>& funcs, const Target& target,
                          const std::string& path, const std::vector<DataSymbol>& data = {});

// The three steps of build_shared_library, for a build that generates code
// once and packages it later (driver/build.cc): the kernels' object file, an
// object holding only data symbols, and linking objects into `path`
// (atomically, as above).
std::string compile_object(const std::vector<ir::LoweredFunc>& funcs, const Target& target);

// Each kernel compiled into an object of its own, `threads` kernels at a time
// (0: one per hardware thread), in input order, with the wall time each took
// (kiln build --time-report). Objects link together: kernels share no symbol.
struct CompiledKernel {
  std::string name;
  std::string object;
  double seconds = 0;
};
std::vector<CompiledKernel> compile_kernels(const std::vector<ir::LoweredFunc>& funcs,
                                            const Target& target, int threads = 0);
std::string data_object(const std::vector<DataSymbol>& data, const Target& target);
// Links with the C compiler ($CC, default cc) for the host's architecture,
// and with LLVM's ld.lld ($KILN_LINKER overrides) for another one (aarch64,
// armv7: cross-compiled packages need no cross toolchain).
void link_shared_library(const std::vector<std::string>& objects, const std::string& path,
                         const Target& target);

// Textual LLVM IR, before or after the O3 pipeline (for debugging and tests).
std::string emit_llvm_ir(const std::vector<ir::LoweredFunc>& funcs, const Target& target,
                         bool optimized = true);
// Native assembly of the optimized module.
std::string emit_assembly(const std::vector<ir::LoweredFunc>& funcs, const Target& target);

}  // namespace kiln::codegen
