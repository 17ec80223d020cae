#!/usr/bin/env python3
"""Write a copy of an x86-64 ELF file (a peer's shared library) whose `cpuid` instructions trap.

    isa_mask.py IN.so OUT.so

Every `cpuid` (0f a2) that objdump disassembles in IN's executable sections becomes `06 90`
(an instruction invalid in 64-bit mode, then a nop) in OUT; cpuid_mask.so, preloaded into the
process, handles the SIGILL by running the real CPUID with AVX-512, VNNI and AMX cleared
(cpuid_mask.c says why this and not CPUID faulting). So ONNX Runtime picks its AVX2 kernels on
a CPU that has AVX-512:

    LD_LIBRARY_PATH=DIR_OF_OUT LD_PRELOAD=build/bench/peers/libkiln_cpuid_mask.so node ...

The instruction addresses come from objdump's disassembly, not a byte search, so an 0f a2
inside another instruction is never touched; each one is checked to read 0f a2 in the file
before it is rewritten. Prints how many were rewritten; exits 1 if there was none.
"""
import os
import re
import shutil
import struct
import subprocess
import sys

PT_LOAD = 1


def load_segments(data):
    """(vaddr, file offset, file size) of each PT_LOAD segment of a little-endian ELF64."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit("isa_mask: not a little-endian ELF64 file")
    e_phoff, = struct.unpack_from("<Q", data, 0x20)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 0x36)
    segments = []
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, e_phoff + i * e_phentsize)
        if p_type == PT_LOAD:
            segments.append((p_vaddr, p_offset, p_filesz))
    return segments


def file_offset(segments, vaddr):
    for seg_vaddr, seg_offset, seg_size in segments:
        if seg_vaddr <= vaddr < seg_vaddr + seg_size:
            return vaddr - seg_vaddr + seg_offset
    raise SystemExit(f"isa_mask: address {vaddr:#x} is in no loaded segment")


def cpuid_addresses(path):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], check=True,
                         capture_output=True, text=True).stdout
    return [int(m.group(1), 16) for m in re.finditer(r"^\s*([0-9a-f]+):\s+cpuid\s*$", out, re.M)]


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: isa_mask.py IN.so OUT.so")
    src, dst = sys.argv[1], sys.argv[2]
    data = bytearray(open(src, "rb").read())
    segments = load_segments(data)
    addresses = cpuid_addresses(src)
    for vaddr in addresses:
        off = file_offset(segments, vaddr)
        if data[off:off + 2] != b"\x0f\xa2":
            raise SystemExit(f"isa_mask: {src}: no cpuid at {vaddr:#x} (file offset {off:#x})")
        data[off:off + 2] = b"\x06\x90"
    if not addresses:
        raise SystemExit(f"isa_mask: {src} has no cpuid instruction")
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    shutil.copymode(src, tmp)
    os.replace(tmp, dst)
    print(f"isa_mask: {len(addresses)} cpuid instructions rewritten in {dst}")


if __name__ == "__main__":
    main()
