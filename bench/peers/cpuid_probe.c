// Prints the CPU features a peer's runtime dispatch reads from CPUID, one "name 0|1" per line.
// bench/smoke/cpuid_mask_smoke.sh runs a copy patched by isa_mask.py under cpuid_mask.so and
// checks that AVX2 stays and AVX-512 goes; the cpuid below is what isa_mask.py rewrites.
#include <stdint.h>
#include <stdio.h>

static void cpuid(uint32_t leaf, uint32_t subleaf, uint32_t r[4]) {
  __asm__ volatile("cpuid"
                   : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3])
                   : "a"(leaf), "c"(subleaf));
}

int main(void) {
  uint32_t l1[4], l7[4], l7s1[4];
  cpuid(1, 0, l1);
  cpuid(7, 0, l7);
  cpuid(7, 1, l7s1);
  printf("fma %u\n", (l1[2] >> 12) & 1);
  printf("avx %u\n", (l1[2] >> 28) & 1);
  printf("avx2 %u\n", (l7[1] >> 5) & 1);
  printf("avx512f %u\n", (l7[1] >> 16) & 1);
  printf("avx512bw %u\n", (l7[1] >> 30) & 1);
  printf("avx512vnni %u\n", (l7[2] >> 11) & 1);
  printf("avxvnni %u\n", (l7s1[0] >> 4) & 1);
  printf("avx512bf16 %u\n", (l7s1[0] >> 5) & 1);
  printf("amxint8 %u\n", (l7[3] >> 25) & 1);
  return 0;
}
