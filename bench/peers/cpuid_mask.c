// An LD_PRELOAD library that makes a peer (ONNX Runtime) see an AVX2-only CPU, so that its
// AVX2 kernels can be timed beside kiln's AVX2 code on a CPU that also has AVX-512.
//
// Why: ONNX Runtime (MLAS, cpuinfo) picks its kernels from CPUID at run time and has no switch
// to cap the ISA, and this VM has no CPUID faulting (arch_prctl(ARCH_SET_CPUID) fails), so the
// instruction itself cannot be trapped. Instead isa_mask.py writes a copy of the library in
// which every `cpuid` (0f a2) is replaced by `06 90`: 0x06 (push es) is invalid in 64-bit
// mode, so it raises SIGILL, and no compiler emits it, so it cannot be confused with a real
// trap. The handler below executes the real CPUID for the same leaf and subleaf, clears the
// features the profile removes, writes the four registers back and steps over the two bytes.
//
// Profile (KILN_CPUID_MASK): "avx2" (the default) removes AVX-512 (every subset), AVX-VNNI,
// AVX-IFMA, AMX and the XSAVE state components of AVX-512 and AMX: what an AMD EPYC Zen 3
// reports. "none" changes nothing (for tests). Any other value is an error at load time.
#define _GNU_SOURCE
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static int mask_avx512;
static volatile unsigned long emulated_count;

static void mask_features(uint32_t leaf, uint32_t subleaf, uint32_t r[4]) {
  enum { EAX, EBX, ECX, EDX };
  if (!mask_avx512) return;
  if (leaf == 7 && subleaf == 0) {
    // EBX: avx512f 16, dq 17, ifma 21, pf 26, er 27, cd 28, bw 30, vl 31.
    r[EBX] &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) |
                (1u << 30) | (1u << 31));
    // ECX: vbmi 1, vbmi2 6, vnni 11, bitalg 12, vpopcntdq 14.
    r[ECX] &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
    // EDX: 4vnniw 2, 4fmaps 3, vp2intersect 8, amx-bf16 22, avx512-fp16 23, amx-tile 24,
    // amx-int8 25.
    r[EDX] &=
        ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
  } else if (leaf == 7 && subleaf == 1) {
    // EAX: avx-vnni 4, avx512-bf16 5, amx-fp16 21, avx-ifma 23.
    r[EAX] &= ~((1u << 4) | (1u << 5) | (1u << 21) | (1u << 23));
    // EDX: avx-vnni-int8 4, avx-ne-convert 5, amx-complex 8, avx-vnni-int16 10, avx10 19.
    r[EDX] &= ~((1u << 4) | (1u << 5) | (1u << 8) | (1u << 10) | (1u << 19));
  } else if (leaf == 0xD && subleaf == 0) {
    // Supported XCR0 components: opmask 5, ZMM_Hi256 6, Hi16_ZMM 7, XTILECFG 17, XTILEDATA 18.
    r[EAX] &= ~((1u << 5) | (1u << 6) | (1u << 7) | (1u << 17) | (1u << 18));
  } else if (leaf == 0x24) {
    r[EAX] = r[EBX] = r[ECX] = r[EDX] = 0;  // AVX10 converged vector ISA leaf
  }
}

static void on_sigill(int sig, siginfo_t* info, void* context) {
  ucontext_t* uc = (ucontext_t*)context;
  greg_t* regs = uc->uc_mcontext.gregs;
  const unsigned char* pc = (const unsigned char*)regs[REG_RIP];
  if (pc[0] != 0x06 || pc[1] != 0x90) {
    // A real illegal instruction: die of it as the process would have without this library.
    signal(sig, SIG_DFL);
    (void)info;
    return;  // the instruction re-executes and the default action ends the process
  }
  uint32_t leaf = (uint32_t)regs[REG_RAX], subleaf = (uint32_t)regs[REG_RCX];
  uint32_t r[4];
  __cpuid_count(leaf, subleaf, r[0], r[1], r[2], r[3]);
  mask_features(leaf, subleaf, r);
  // cpuid zero-extends its 32-bit results into the 64-bit registers.
  regs[REG_RAX] = r[0];
  regs[REG_RBX] = r[1];
  regs[REG_RCX] = r[2];
  regs[REG_RDX] = r[3];
  regs[REG_RIP] += 2;
  emulated_count++;
}

static void report_count(void) {
  if (getenv("KILN_CPUID_MASK_REPORT"))
    fprintf(stderr, "cpuid_mask: emulated %lu cpuid instructions\n", emulated_count);
}

__attribute__((constructor)) static void install(void) {
  const char* profile = getenv("KILN_CPUID_MASK");
  if (!profile || !*profile || strcmp(profile, "avx2") == 0) {
    mask_avx512 = 1;
  } else if (strcmp(profile, "none") == 0) {
    mask_avx512 = 0;
  } else {
    fprintf(stderr, "cpuid_mask: unknown KILN_CPUID_MASK '%s' (expected avx2 or none)\n", profile);
    _exit(2);
  }
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_sigill;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGILL, &action, NULL) != 0) {
    perror("cpuid_mask: sigaction(SIGILL)");
    _exit(2);
  }
  atexit(report_count);
}
