// Permission to use Intel AMX tile data. Linux (5.16+) leaves the AMX tile
// state (XTILEDATA, 8 KiB per thread) off until a process asks for it with
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); the first tile
// instruction without that permission kills the process with SIGILL. The
// graph executor asks once per process before any kernel of a package whose
// mod.json "requires" lists an AMX feature runs (graph_executor.cc).
#pragma once

#include <string>

namespace kiln::runtime {

// Asks for the permission once per process (later calls return the first
// answer). "" when granted; otherwise why not, e.g. "amx-tile not supported by
// this CPU" or "the Linux kernel refused AMX tile data (arch_prctl(...): ...)".
std::string request_amx_permission();

// The system call alone, whatever CPUID says (what request_amx_permission()
// asks once it has seen amx-tile): "" or the kernel's refusal. On a CPU
// without AMX, Linux answers EOPNOTSUPP.
std::string amx_permission_from_linux();

// request_amx_permission(), throwing std::runtime_error with its reason.
void require_amx_permission();

// The message for an outcome (for tests, and so that every branch reads the
// same): cpu_has_amx_tile from CPUID; syscall_errno 0 when arch_prctl
// succeeded, else its errno.
std::string amx_permission_message(bool cpu_has_amx_tile, int syscall_errno);

}  // namespace kiln::runtime
