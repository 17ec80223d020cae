#include "runtime/amx.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "runtime/cpu_features.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kiln::runtime {

namespace {

// From the Linux uapi (asm/prctl.h, asm/fpu/xstate.h): not in every libc's headers.
constexpr int kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

}  // namespace

std::string amx_permission_from_linux() {
#if defined(__linux__) && defined(__x86_64__)
  long rc = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata);
  return amx_permission_message(true, rc == 0 ? 0 : errno);
#else
  return amx_permission_message(true, ENOSYS);
#endif
}

std::string amx_permission_message(bool cpu_has_amx_tile, int syscall_errno) {
  if (!cpu_has_amx_tile) return "amx-tile not supported by this CPU";
  if (syscall_errno == 0) return "";
  return "the Linux kernel refused AMX tile data (arch_prctl(ARCH_REQ_XCOMP_PERM, "
         "XFEATURE_XTILEDATA): " +
         std::string(std::strerror(syscall_errno)) +
         (syscall_errno == EINVAL ? "; Linux 5.16 or later is needed" : "") + ")";
}

std::string request_amx_permission() {
  // The permission is per process and asking twice is harmless, but the
  // answer cannot change: ask once.
  static std::once_flag once;
  static std::string answer;
  std::call_once(once, [] {
    answer = host_has_cpu_feature("amx-tile") ? amx_permission_from_linux()
                                              : amx_permission_message(false, 0);
  });
  return answer;
}

void require_amx_permission() {
  std::string why = request_amx_permission();
  if (!why.empty()) throw std::runtime_error(why);
}

}  // namespace kiln::runtime
