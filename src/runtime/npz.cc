#include "runtime/npz.h"

#include <archive.h>
#include <archive_entry.h>
#include <locale.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>

namespace kiln::runtime {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

[[noreturn]] void fail(const std::string& what, const std::string& msg) {
  throw std::runtime_error(what + ": " + msg);
}

// ---- dtype <-> descr -----------------------------------------------------------

struct Descr {
  DType dtype;
  bool swap = false;  // big-endian data on this little-endian host
};

Descr parse_descr(const std::string& d, const std::string& what) {
  if (d.size() < 3) fail(what, "unsupported dtype '" + d + "'");
  char order = d[0];
  char kind = d[1];
  std::string digits = d.substr(2);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 2)
    fail(what, "unsupported dtype '" + d + "'");
  int size = std::stoi(digits);
  if (order != '<' && order != '>' && order != '|' && order != '=')
    fail(what, "unsupported dtype '" + d + "'");
  Descr r;
  r.swap = order == '>' && size > 1;
  auto ok = [&](DTypeCode code, int bits) {
    r.dtype = DType{code, static_cast<uint8_t>(bits), 1};
    return r;
  };
  switch (kind) {
    case 'f':
      if (size == 2 || size == 4 || size == 8) return ok(DTypeCode::Float, size * 8);
      break;
    case 'i':
      if (size == 1 || size == 2 || size == 4 || size == 8) return ok(DTypeCode::Int, size * 8);
      break;
    case 'u':
      if (size == 1 || size == 2 || size == 4 || size == 8) return ok(DTypeCode::UInt, size * 8);
      break;
    case 'b':
      if (size == 1) return ok(DTypeCode::Bool, 1);
      break;
    case 'V':
      // bfloat16, as npy_descr writes it (numpy has no bfloat16 of its own).
      if (size == 2) return ok(DTypeCode::BFloat, 16);
      break;
    default: break;
  }
  fail(what, "unsupported dtype '" + d +
                 "' (supported: <f2 <f4 <f8 |i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 |b1 |V2)");
}

// ---- the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  Header parse() {
    Header h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      std::string key = string_literal();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          bad("structured dtypes are not supported (descr is not a string)");
        h.descr = string_literal();
        seen_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        seen_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        seen_shape = true;
      } else {
        bad("unexpected key '" + key + "'");
      }
      skip_ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      skip_ws();
      if (peek() != '}') bad("expected ',' or '}'");
    }
    if (!seen_descr || !seen_order || !seen_shape)
      bad("missing 'descr', 'fortran_order' or 'shape'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& msg) {
    fail(what_, "bad .npy header (" + msg + "): " + s_);
  }
  void skip_ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  char peek() { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    skip_ws();
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string string_literal() {
    skip_ws();
    char q = peek();
    if (q != '\'' && q != '"') bad("expected a string");
    size_t end = s_.find(q, i_ + 1);
    if (end == std::string::npos) bad("unterminated string");
    std::string r = s_.substr(i_ + 1, end - i_ - 1);
    i_ = end + 1;
    return r;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) return i_ += 4, true;
    if (s_.compare(i_, 5, "False") == 0) return i_ += 5, false;
    bad("expected True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      size_t start = i_;
      while (std::isdigit(static_cast<unsigned char>(peek()))) ++i_;
      if (i_ == start || i_ - start > 18) bad("bad dimension in shape");
      dims.push_back(std::stoll(s_.substr(start, i_ - start)));
      // Python writes long integers of old pickles as 3L.
      if (peek() == 'L') ++i_;
      skip_ws();
      if (peek() == ',')
        ++i_;
      else if (peek() != ')')
        bad("expected ',' or ')' in shape");
    }
    ++i_;
    return dims;
  }

  const std::string& s_;
  const std::string& what_;
  size_t i_ = 0;
};

// ---- reading -----------------------------------------------------------------------

// Reads exactly n bytes or returns fewer at the end of the data.
using ReadFn = std::function<size_t(void* buf, size_t n)>;

void read_exact(const ReadFn& read, void* buf, size_t n, const std::string& what,
                const char* part) {
  size_t got = 0;
  while (got < n) {
    size_t r = read(static_cast<char*>(buf) + got, n - got);
    if (r == 0) break;
    got += r;
  }
  if (got != n)
    fail(what, std::string("truncated .npy (") + part + ": expected " + std::to_string(n) +
                   " bytes, got " + std::to_string(got) + ")");
}

void byteswap(void* data, int64_t count, int64_t elem) {
  auto* p = static_cast<unsigned char*>(data);
  for (int64_t i = 0; i < count; ++i, p += elem) std::reverse(p, p + elem);
}

// `available`: bytes the stream holds in all (header included), or -1 if unknown.
NDArray read_npy(const ReadFn& read, int64_t available, const std::string& what) {
  unsigned char pre[8];
  read_exact(read, pre, 8, what, "magic");
  if (std::memcmp(pre, kMagic, kMagicLen) != 0) fail(what, "not a .npy array (bad magic)");
  int major = pre[6], minor = pre[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    fail(what, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor));
  size_t header_len = 0;
  size_t prefix = 8;
  if (major == 1) {
    unsigned char l[2];
    read_exact(read, l, 2, what, "header length");
    header_len = l[0] | (static_cast<size_t>(l[1]) << 8);
    prefix += 2;
  } else {
    unsigned char l[4];
    read_exact(read, l, 4, what, "header length");
    header_len = l[0] | (static_cast<size_t>(l[1]) << 8) | (static_cast<size_t>(l[2]) << 16) |
                 (static_cast<size_t>(l[3]) << 24);
    prefix += 4;
  }
  if (available >= 0 && static_cast<int64_t>(prefix + header_len) > available)
    fail(what, "truncated .npy (header of " + std::to_string(header_len) + " bytes)");
  if (header_len > (1u << 24)) fail(what, "bad .npy header length " + std::to_string(header_len));
  std::string text(header_len, '\0');
  read_exact(read, text.data(), header_len, what, "header");
  Header h = HeaderParser(text, what).parse();
  if (h.fortran_order)
    fail(what,
         "fortran_order=True arrays are not supported (save a C-contiguous array, e.g. "
         "numpy.ascontiguousarray)");
  Descr d = parse_descr(h.descr, what);

  int64_t numel = 1;
  for (int64_t dim : h.shape) {
    if (dim != 0 && numel > std::numeric_limits<int64_t>::max() / 16 / dim)
      fail(what, "array shape is too large");
    numel *= dim;
  }
  int64_t nbytes = numel * d.dtype.bytes();
  if (available >= 0 && static_cast<int64_t>(prefix + header_len) + nbytes > available)
    fail(what, "truncated .npy (header says " + std::to_string(nbytes) + " data bytes, there are " +
                   std::to_string(available - static_cast<int64_t>(prefix + header_len)) + ")");
  NDArray a = NDArray::empty(h.shape, d.dtype);
  read_exact(read, a.data(), static_cast<size_t>(nbytes), what, "data");
  char extra;
  if (read(&extra, 1) != 0) fail(what, "trailing bytes after the array data");
  if (d.swap) byteswap(a.data(), numel, d.dtype.bytes());
  if (d.dtype.code == DTypeCode::Bool) {
    auto* p = a.data_as<uint8_t>();
    for (int64_t i = 0; i < numel; ++i)
      if (p[i] > 1) fail(what, "bool array holds a byte other than 0 or 1");
  }
  return a;
}

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ReadArchive = std::unique_ptr<struct archive, ArchiveDeleter>;

std::string archive_error(struct archive* a) {
  const char* e = archive_error_string(a);
  return e ? e : "unknown error";
}

// Member names are bytes (numpy writes a str key as UTF-8, flagging it when not ASCII, and
// reads it back as written). libarchive converts them to the locale's charset, which loses a
// UTF-8 name in the C locale, and reads '\\' as '/' in a name without the UTF-8 flag; so the
// names come from the central directory as stored (zip_member_names), and libarchive's only
// where that directory could not be read.
std::vector<NamedArray> read_members(struct archive* a, const std::string& file,
                                     const std::vector<std::string>& raw_names) {
  std::vector<NamedArray> out;
  std::set<std::string> names;
  for (size_t index = 0;; ++index) {
    struct archive_entry* entry = nullptr;
    int r = archive_read_next_header(a, &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      fail(file, "not a valid .npz (zip) archive: " + archive_error(a));
    const char* converted = archive_entry_pathname(entry);
    std::string member = converted ? converted : "";
    // The stored name, where it is the one libarchive read (the same up to '\\' -> '/'; a
    // name it could not convert is empty).
    if (index < raw_names.size()) {
      std::string slashed = raw_names[index];
      std::replace(slashed.begin(), slashed.end(), '\\', '/');
      if (member.empty() || member == slashed) member = raw_names[index];
    }
    std::string what = file + ": member '" + member + "'";
    if (archive_entry_filetype(entry) == AE_IFDIR) continue;
    if (archive_entry_filetype(entry) != AE_IFREG) fail(what, "not a regular file");
    // numpy names members "<name>.npy" but reads members without the suffix too.
    bool suffix = member.size() > 4 && member.compare(member.size() - 4, 4, ".npy") == 0;
    std::string name = suffix ? member.substr(0, member.size() - 4) : member;
    if (name.empty()) fail(what, "empty array name");
    if (!names.insert(name).second) fail(what, "duplicate array name '" + name + "'");
    int64_t available = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : -1;
    ReadFn read = [&](void* buf, size_t n) -> size_t {
      la_ssize_t got = archive_read_data(a, buf, n);
      if (got < 0) fail(what, "cannot read member: " + archive_error(a));
      return static_cast<size_t>(got);
    };
    out.push_back({name, read_npy(read, available, what)});
  }
  return out;
}

// A zip ends with its central directory, closed by an "end of central
// directory" record within the last 64 KiB (+ 22 bytes). libarchive reads a
// zip without it through the local headers and would accept a file cut in
// its directory, so check for the record first.
constexpr size_t kEocdSearch = 65535 + 22;

bool has_end_of_central_directory(const char* tail, size_t n) {
  static const char kSig[] = "PK\x05\x06";
  if (n < 22) return false;
  for (size_t i = n - 22 + 1; i-- > 0;)
    if (std::memcmp(tail + i, kSig, 4) == 0) return true;
  return false;
}

void check_complete_zip(const char* tail, size_t n, const std::string& what) {
  if (!has_end_of_central_directory(tail, n))
    fail(what,
         "not a valid .npz (zip) archive: truncated, or not a zip file (no end of central "
         "directory record)");
}

ReadArchive new_zip_reader() {
  ReadArchive a(archive_read_new());
  if (!a) throw std::bad_alloc();
  archive_read_support_format_zip(a.get());
  archive_read_support_filter_none(a.get());
  return a;
}

uint16_t le16(const unsigned char* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t le32(const unsigned char* p) { return le16(p) | static_cast<uint32_t>(le16(p + 2)) << 16; }
uint64_t le64(const unsigned char* p) { return le32(p) | static_cast<uint64_t>(le32(p + 4)) << 32; }

// Reads n bytes at an offset of the archive; fewer (or none) past its end.
using ReadAtFn = std::function<std::string(uint64_t offset, size_t n)>;

// The members' names as the central directory stores them, in the order of their local
// headers (the order libarchive returns the members in), zip64 included. Empty when the
// directory is not where its end record says (a zip with data before it, say): libarchive's
// names are used then.
std::vector<std::string> zip_member_names(const ReadAtFn& read_at, uint64_t size) {
  const uint64_t tail_start = size > kEocdSearch ? size - kEocdSearch : 0;
  const std::string tail = read_at(tail_start, static_cast<size_t>(size - tail_start));
  const auto* t = reinterpret_cast<const unsigned char*>(tail.data());
  size_t eocd = std::string::npos;
  for (size_t i = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; i-- > 0;)
    if (std::memcmp(t + i, "PK\x05\x06", 4) == 0) {
      eocd = i;
      break;
    }
  if (eocd == std::string::npos) return {};
  uint64_t count = le16(t + eocd + 10), cd_size = le32(t + eocd + 12),
           cd_offset = le32(t + eocd + 16);
  if (count == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
    // Zip64: the locator just before the end record gives the zip64 end record.
    if (eocd < 20 || std::memcmp(t + eocd - 20, "PK\x06\x07", 4) != 0) return {};
    const std::string z = read_at(le64(t + eocd - 20 + 8), 56);
    const auto* r = reinterpret_cast<const unsigned char*>(z.data());
    if (z.size() < 56 || std::memcmp(r, "PK\x06\x06", 4) != 0) return {};
    count = le64(r + 32);
    cd_size = le64(r + 40);
    cd_offset = le64(r + 48);
  }
  if (cd_offset > size || cd_size > size - cd_offset || count > cd_size / 46) return {};
  const std::string cd = read_at(cd_offset, static_cast<size_t>(cd_size));
  if (cd.size() != cd_size) return {};
  const auto* c = reinterpret_cast<const unsigned char*>(cd.data());
  std::vector<std::pair<uint64_t, std::string>> members;  // (local header offset, name)
  size_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (pos + 46 > cd.size() || std::memcmp(c + pos, "PK\x01\x02", 4) != 0) return {};
    const size_t name_len = le16(c + pos + 28), extra_len = le16(c + pos + 30),
                 comment_len = le16(c + pos + 32);
    if (pos + 46 + name_len + extra_len + comment_len > cd.size()) return {};
    uint64_t offset = le32(c + pos + 42);
    if (offset == 0xffffffff) {
      // In the zip64 extra field (0x0001), after the sizes that are 0xffffffff here too.
      size_t skip =
          (le32(c + pos + 24) == 0xffffffff ? 8 : 0) + (le32(c + pos + 20) == 0xffffffff ? 8 : 0);
      const unsigned char* e = c + pos + 46 + name_len;
      bool found = false;
      for (size_t k = 0; k + 4 <= extra_len && !found;) {
        const size_t id = le16(e + k), len = le16(e + k + 2);
        if (id == 0x0001 && skip + 8 <= len && k + 4 + len <= extra_len) {
          offset = le64(e + k + 4 + skip);
          found = true;
        }
        k += 4 + len;
      }
      if (!found) return {};
    }
    members.emplace_back(offset, cd.substr(pos + 46, name_len));
    pos += 46 + name_len + extra_len + comment_len;
  }
  std::stable_sort(members.begin(), members.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> names;
  for (auto& m : members) names.push_back(std::move(m.second));
  return names;
}

// libarchive in a UTF-8 locale for this thread while it lives: what lets the zip writer store
// a non-ASCII name as UTF-8 with the flag that says so (numpy's reader decodes a name without
// it as cp437), and its reader convert such a name at all.
class Utf8Locale {
 public:
  Utf8Locale() {
    static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
    if (utf8) previous_ = uselocale(utf8);
  }
  ~Utf8Locale() {
    if (previous_) uselocale(previous_);
  }
  Utf8Locale(const Utf8Locale&) = delete;
  Utf8Locale& operator=(const Utf8Locale&) = delete;

 private:
  locale_t previous_ = static_cast<locale_t>(0);
};

// ---- writing ------------------------------------------------------------------------

std::string npy_header(const NDArray& array) {
  std::string shape = "(";
  for (size_t i = 0; i < array.shape().size(); ++i) {
    shape += std::to_string(array.shape()[i]);
    if (i + 1 < array.shape().size() || array.shape().size() == 1) shape += ",";
    if (i + 1 < array.shape().size()) shape += " ";
  }
  shape += ")";
  std::string dict = "{'descr': '" + npy_descr(array.dtype()) +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and end with '\n' so that the data starts 64-byte aligned
  // (what numpy writes).
  for (int version : {1, 2}) {
    size_t prefix = version == 1 ? 10 : 12;
    size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
    size_t header_len = total - prefix;
    if (version == 1 && header_len > 65535) continue;
    std::string out(kMagic, kMagicLen);
    out += static_cast<char>(version);
    out += '\0';
    for (size_t i = 0; i < prefix - 8; ++i)
      out += static_cast<char>((header_len >> (8 * i)) & 0xff);
    out += dict;
    out.append(header_len - dict.size() - 1, ' ');
    out += '\n';
    return out;
  }
  throw std::logic_error("unreachable");
}

// libarchive writes through this sink.
struct Sink {
  std::function<void(const void*, size_t)> write;
  std::string error;
};

la_ssize_t sink_write(struct archive*, void* client, const void* buf, size_t n) {
  auto* s = static_cast<Sink*>(client);
  try {
    s->write(buf, n);
  } catch (const std::exception& e) {
    s->error = e.what();
    return -1;
  }
  return static_cast<la_ssize_t>(n);
}

void write_zip(Sink& sink, const std::vector<NamedArrayRef>& arrays, NpzCompression compression,
               const std::string& what) {
  std::set<std::string> names;
  for (const auto& a : arrays) {
    if (a.name.empty()) fail(what, "an array name is empty");
    if (!names.insert(a.name).second) fail(what, "duplicate array name '" + a.name + "'");
    if (!a.array || !a.array->defined()) fail(what, "array '" + a.name + "' is undefined");
  }
  Utf8Locale utf8;
  struct archive* ar = archive_write_new();
  if (!ar) throw std::bad_alloc();
  std::unique_ptr<struct archive, int (*)(struct archive*)> guard(ar, archive_write_free);
  auto check = [&](int r, const char* op) {
    if (r < ARCHIVE_WARN) {
      std::string why = sink.error.empty() ? archive_error(ar) : sink.error;
      fail(what, std::string(op) + ": " + why);
    }
  };
  check(archive_write_set_format_zip(ar), "zip format");
  check(archive_write_set_options(ar, compression == NpzCompression::Stored
                                          ? "zip:compression=store"
                                          : "zip:compression=deflate"),
        "zip compression");
  // Whole blocks would pad the file: write bytes as they come.
  check(archive_write_set_bytes_in_last_block(ar, 1), "block size");
  check(archive_write_open2(ar, &sink, nullptr, sink_write, nullptr, nullptr), "open");
  for (const auto& a : arrays) {
    std::string header = npy_header(*a.array);
    int64_t size = static_cast<int64_t>(header.size()) + a.array->nbytes();
    std::unique_ptr<struct archive_entry, void (*)(struct archive_entry*)> entry(
        archive_entry_new(), archive_entry_free);
    archive_entry_set_pathname(entry.get(), (a.name + ".npy").c_str());
    archive_entry_set_filetype(entry.get(), AE_IFREG);
    archive_entry_set_perm(entry.get(), 0644);
    archive_entry_set_size(entry.get(), size);
    // A fixed time keeps the bytes reproducible (1980-01-01, the zip epoch).
    archive_entry_set_mtime(entry.get(), 315532800, 0);
    check(archive_write_header(ar, entry.get()), ("member '" + a.name + ".npy'").c_str());
    auto put = [&](const void* p, size_t n) {
      const char* c = static_cast<const char*>(p);
      while (n > 0) {
        size_t chunk = std::min<size_t>(n, 1 << 24);
        la_ssize_t w = archive_write_data(ar, c, chunk);
        if (w <= 0) check(ARCHIVE_FATAL, ("member '" + a.name + ".npy'").c_str());
        c += w;
        n -= static_cast<size_t>(w);
      }
    };
    put(header.data(), header.size());
    put(a.array->data(), static_cast<size_t>(a.array->nbytes()));
  }
  check(archive_write_close(ar), "close");
}

std::string temp_name_beside(const std::string& path) {
  static std::atomic<int> counter{0};
  return path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

}  // namespace

std::string npy_descr(DType t) {
  if (t.lanes != 1) throw std::invalid_argument(".npy cannot hold vector dtype " + t.str());
  switch (t.code) {
    case DTypeCode::Float: return "<f" + std::to_string(t.bits / 8);
    case DTypeCode::Int: return t.bits == 8 ? "|i1" : "<i" + std::to_string(t.bits / 8);
    case DTypeCode::UInt: return t.bits == 8 ? "|u1" : "<u" + std::to_string(t.bits / 8);
    case DTypeCode::Bool: return "|b1";
    // numpy has no bfloat16: two raw bytes, as numpy saves ml_dtypes' bfloat16
    // (parse_descr reads |V2 back as bfloat16; kiln's packed bf16 weights).
    case DTypeCode::BFloat:
      if (t.bits == 16) return "|V2";
      break;
  }
  throw std::invalid_argument(".npy cannot hold dtype " + t.str());
}

NDArray parse_npy(const void* data, size_t size, const std::string& what) {
  size_t pos = 0;
  ReadFn read = [&](void* buf, size_t n) {
    size_t k = std::min(n, size - pos);
    std::memcpy(buf, static_cast<const char*>(data) + pos, k);
    pos += k;
    return k;
  };
  return read_npy(read, static_cast<int64_t>(size), what);
}

std::string serialize_npy(const NDArray& array) {
  std::string out = npy_header(array);
  out.append(static_cast<const char*>(array.data()), static_cast<size_t>(array.nbytes()));
  return out;
}

std::vector<NamedArray> read_npz(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not an .npz file");
  if (!std::filesystem::exists(path, ec)) fail(path, "no such file");
  if (!std::filesystem::is_regular_file(path, ec)) fail(path, "not a regular file");
  std::vector<std::string> raw_names;
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    if (!f) fail(path, std::string("cannot open: ") + std::strerror(errno));
    std::fseek(f.get(), 0, SEEK_END);
    const long size = std::ftell(f.get());
    ReadAtFn read_at = [&](uint64_t offset, size_t n) {
      std::string bytes(n, '\0');
      if (offset > static_cast<uint64_t>(size) ||
          std::fseek(f.get(), static_cast<long>(offset), SEEK_SET) != 0)
        return std::string();
      bytes.resize(std::fread(bytes.data(), 1, n, f.get()));
      return bytes;
    };
    const uint64_t usize = size > 0 ? static_cast<uint64_t>(size) : 0;
    const uint64_t start = usize > kEocdSearch ? usize - kEocdSearch : 0;
    const std::string tail = read_at(start, static_cast<size_t>(usize - start));
    check_complete_zip(tail.data(), tail.size(), path);
    raw_names = zip_member_names(read_at, usize);
  }
  Utf8Locale utf8;
  ReadArchive a = new_zip_reader();
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
    fail(path, "cannot open as .npz (zip): " + archive_error(a.get()));
  return read_members(a.get(), path, raw_names);
}

std::vector<NamedArray> read_npz_memory(const void* data, size_t size, const std::string& what) {
  size_t tail = std::min(size, kEocdSearch);
  check_complete_zip(static_cast<const char*>(data) + (size - tail), tail, what);
  ReadAtFn read_at = [&](uint64_t offset, size_t n) {
    if (offset > size) return std::string();
    return std::string(static_cast<const char*>(data) + offset,
                       std::min<uint64_t>(n, size - offset));
  };
  const std::vector<std::string> raw_names = zip_member_names(read_at, size);
  Utf8Locale utf8;
  ReadArchive a = new_zip_reader();
  if (archive_read_open_memory(a.get(), data, size) != ARCHIVE_OK)
    fail(what, "cannot open as .npz (zip): " + archive_error(a.get()));
  return read_members(a.get(), what, raw_names);
}

std::string write_npz_memory(const std::vector<NamedArrayRef>& arrays, NpzCompression compression) {
  std::string out;
  Sink sink;
  sink.write = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  write_zip(sink, arrays, compression, "npz in memory");
  return out;
}

void write_npz(const std::string& path, const std::vector<NamedArrayRef>& arrays,
               NpzCompression compression) {
  std::string tmp = temp_name_beside(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(path, std::string("cannot write: ") + std::strerror(errno));
  Sink sink;
  sink.write = [&](const void* p, size_t n) {
    if (std::fwrite(p, 1, n, f) != n) throw std::runtime_error(std::strerror(errno));
  };
  try {
    write_zip(sink, arrays, compression, path);
    int rc = std::fclose(f);
    f = nullptr;
    if (rc != 0) fail(path, std::string("cannot write: ") + std::strerror(errno));
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) fail(path, "cannot rename the finished file into place: " + ec.message());
  } catch (...) {
    if (f) std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
}

void write_npz(const std::string& path, const std::vector<NamedArray>& arrays,
               NpzCompression compression) {
  std::vector<NamedArrayRef> refs;
  refs.reserve(arrays.size());
  for (const auto& a : arrays) refs.push_back({a.name, &a.array});
  write_npz(path, refs, compression);
}

}  // namespace kiln::runtime
