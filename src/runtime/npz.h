// NumPy .npy / .npz reading and writing (the format of kiln run's inputs and
// outputs and of a package's mod.params). An .npz is a zip archive with one
// .npy member per array; libarchive does the zip part.
//
// Supported element types: <f2 <f4 <f8, <i2 <i4 <i8, |i1, |u1 <u2 <u4 <u8,
// |b1 (bool, one byte per element); big-endian members are byte-swapped on
// read. .npy versions 1.0, 2.0 and 3.0; 0-d arrays. fortran_order=True and
// object arrays are rejected. Every error is a std::runtime_error naming the
// file and the member.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/ndarray.h"

namespace kiln::runtime {

// One array of an .npz, named without the ".npy" suffix.
struct NamedArray {
  std::string name;
  NDArray array;
};

// Arrays in the order of the archive's members, named without ".npy" (a
// member without the suffix is read as .npy too, as numpy does). Members may
// be stored or deflated.
std::vector<NamedArray> read_npz(const std::string& path);
// The same from an .npz in memory; `what` names it in errors (a file name).
std::vector<NamedArray> read_npz_memory(const void* data, size_t size, const std::string& what);

enum class NpzCompression { Stored, Deflated };

// Writes `arrays` as members "<name>.npy", in order. The file appears only
// complete: it is written under a temporary name beside `path` and renamed,
// so a failed write leaves no file (and an existing file untouched).
// Throws on duplicate or empty names.
void write_npz(const std::string& path, const std::vector<NamedArray>& arrays,
               NpzCompression compression = NpzCompression::Stored);
// The same with borrowed arrays (name, array) that are not copied.
struct NamedArrayRef {
  std::string name;
  const NDArray* array;
};
void write_npz(const std::string& path, const std::vector<NamedArrayRef>& arrays,
               NpzCompression compression = NpzCompression::Stored);
// The .npz bytes (for embedding params into a self-contained library).
std::string write_npz_memory(const std::vector<NamedArrayRef>& arrays,
                             NpzCompression compression = NpzCompression::Stored);

// A single .npy: parse (`what` names it in errors) and serialize (version 1.0,
// or 2.0 when the header needs it).
NDArray parse_npy(const void* data, size_t size, const std::string& what);
std::string serialize_npy(const NDArray& array);

// "<f4" etc. for a dtype (throws for dtypes .npy cannot hold, e.g. vectors).
std::string npy_descr(DType dtype);

}  // namespace kiln::runtime
