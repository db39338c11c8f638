// File-format primitives for C-HNSW: CRC-32, little-endian writer/reader with bounds checks, and
// atomic file replacement.
//
// Container layout (all integers little-endian):
//
//   offset size  field
//   0      8     magic  = 0x89 'G' 'S' 'C' 'H' 'N' 'S' 'W'
//   8      4     format version (kFormatVersion)
//   12     4     header size (kHeaderSize = 40)
//   16     8     payload size in bytes
//   24     4     CRC-32 (IEEE 802.3, same as zlib.crc32) of the payload
//   28     4     flags (0; reserved)
//   32     4     CRC-32 of header bytes [0, 32)
//   36     4     reserved: written as 0, a file with any other value is refused (these
//                 bytes are covered by neither CRC)
//   40     ...   payload (see Index::write_payload in chnsw.h)
//
// Every reader error is reported as chnsw::format_error (a std::invalid_argument, ValueError in
// Python) naming the problem; the reader never trusts a count before checking it against the
// bytes that remain.
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#if defined(_WIN32)
#include <io.h>
#include <windows.h>
#else
#include <fcntl.h>
#include <unistd.h>
#endif

namespace chnsw {

/// A malformed, truncated, corrupted or foreign index file / byte string.
class format_error : public std::invalid_argument {
 public:
  explicit format_error(const std::string& what) : std::invalid_argument(what) {}
};

/// An operating-system error while reading or writing a file (OSError in Python).
class io_error : public std::runtime_error {
 public:
  io_error(const std::string& what, int err) : std::runtime_error(what), errno_(err) {}
  int error_code() const { return errno_; }

 private:
  int errno_;
};

constexpr uint8_t kMagic[8] = {0x89, 'G', 'S', 'C', 'H', 'N', 'S', 'W'};
constexpr uint32_t kFormatVersion = 1;
constexpr std::size_t kHeaderSize = 40;

// ------------------------------------------------------------------ CRC-32 (slicing-by-8)
namespace detail {
struct Crc32Tables {
  uint32_t t[8][256];
  Crc32Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1);
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = t[0][i];
      for (int s = 1; s < 8; ++s) {
        c = t[0][c & 0xFFu] ^ (c >> 8);
        t[s][i] = c;
      }
    }
  }
};
inline const Crc32Tables& crc_tables() {
  static const Crc32Tables tables;
  return tables;
}
}  // namespace detail

/// Incremental CRC-32; crc32_update(0, data, n) equals Python's zlib.crc32(data).
inline uint32_t crc32_update(uint32_t crc, const void* data, std::size_t n) {
  const auto& T = detail::crc_tables().t;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    const uint32_t lo = c ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                             uint32_t(p[3]) << 24);
    const uint32_t hi =
        uint32_t(p[4]) | uint32_t(p[5]) << 8 | uint32_t(p[6]) << 16 | uint32_t(p[7]) << 24;
    c = T[7][lo & 0xFF] ^ T[6][(lo >> 8) & 0xFF] ^ T[5][(lo >> 16) & 0xFF] ^ T[4][lo >> 24] ^
        T[3][hi & 0xFF] ^ T[2][(hi >> 8) & 0xFF] ^ T[1][(hi >> 16) & 0xFF] ^ T[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = T[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
  return ~c;
}

// ------------------------------------------------------------------ little-endian encoding
inline void put_le(uint8_t* dst, uint64_t v, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; ++i) dst[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint64_t get_le(const uint8_t* src, std::size_t bytes) {
  uint64_t v = 0;
  for (std::size_t i = 0; i < bytes; ++i) v |= uint64_t(src[i]) << (8 * i);
  return v;
}

inline constexpr bool host_is_little_endian() {
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return false;
#else
  return true;
#endif
}

/// Destination of serialised bytes: keeps a running CRC and size of everything written.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  void write(const void* p, std::size_t n) {
    if (n == 0) return;
    crc_ = crc32_update(crc_, p, n);
    size_ += n;
    raw_write(p, n);
  }
  void u8(uint8_t v) { write(&v, 1); }
  void u32(uint32_t v) {
    uint8_t b[4];
    put_le(b, v, 4);
    write(b, 4);
  }
  void u64(uint64_t v) {
    uint8_t b[8];
    put_le(b, v, 8);
    write(b, 8);
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  /// Arrays of 4-byte values (uint32_t / float) in little-endian order.
  template <class T>
  void array32(const T* p, std::size_t n) {
    static_assert(sizeof(T) == 4, "array32 needs 4-byte elements");
    if (host_is_little_endian()) {
      write(p, n * 4);
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        uint32_t v;
        std::memcpy(&v, p + i, 4);
        u32(v);
      }
    }
  }
  uint32_t crc() const { return crc_; }
  uint64_t size() const { return size_; }

 protected:
  virtual void raw_write(const void* p, std::size_t n) = 0;

 private:
  uint32_t crc_ = 0;
  uint64_t size_ = 0;
};

class StringSink : public ByteSink {
 public:
  std::string& str() { return out_; }

 protected:
  void raw_write(const void* p, std::size_t n) override {
    out_.append(static_cast<const char*>(p), n);
  }

 private:
  std::string out_;
};

class FileSink : public ByteSink {
 public:
  FileSink(std::FILE* f, const std::string& path) : f_(f), path_(path) {}

 protected:
  void raw_write(const void* p, std::size_t n) override {
    if (std::fwrite(p, 1, n, f_) != n) throw io_error("cannot write " + path_ + ": " + std::strerror(errno), errno);
  }

 private:
  std::FILE* f_;
  std::string path_;
};

/// Bounds-checked little-endian reader over a byte range. Every failure is a format_error.
class ByteReader {
 public:
  ByteReader(const uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  std::size_t remaining() const { return n_ - pos_; }
  std::size_t position() const { return pos_; }
  void need(std::size_t bytes, const char* what) const {
    if (bytes > remaining())
      throw format_error(std::string("corrupt payload: truncated while reading ") + what);
  }
  uint8_t u8(const char* what) {
    need(1, what);
    return p_[pos_++];
  }
  uint32_t u32(const char* what) {
    need(4, what);
    const uint32_t v = static_cast<uint32_t>(get_le(p_ + pos_, 4));
    pos_ += 4;
    return v;
  }
  uint64_t u64(const char* what) {
    need(8, what);
    const uint64_t v = get_le(p_ + pos_, 8);
    pos_ += 8;
    return v;
  }
  int64_t i64(const char* what) { return static_cast<int64_t>(u64(what)); }
  /// Read n 4-byte values; `n` has already been checked against remaining() by the caller or is
  /// checked here (with overflow-safe arithmetic).
  template <class T>
  void array32(T* dst, std::size_t n, const char* what) {
    static_assert(sizeof(T) == 4, "array32 needs 4-byte elements");
    if (n > remaining() / 4)
      throw format_error(std::string("corrupt payload: truncated while reading ") + what);
    // An empty std::vector's data() may be null, and memcpy(nullptr, p, 0) is undefined
    // behaviour (UBSan reports it: an index with no nodes, `make sanitize`).
    if (n == 0) return;
    if (host_is_little_endian()) {
      std::memcpy(dst, p_ + pos_, n * 4);
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const uint32_t v = static_cast<uint32_t>(get_le(p_ + pos_ + 4 * i, 4));
        std::memcpy(dst + i, &v, 4);
      }
    }
    pos_ += n * 4;
  }

 private:
  const uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

/// Build the 40-byte header for a payload of `payload_size` bytes with CRC `payload_crc`.
inline std::array<uint8_t, kHeaderSize> make_header(uint64_t payload_size, uint32_t payload_crc) {
  std::array<uint8_t, kHeaderSize> h{};
  std::memcpy(h.data(), kMagic, 8);
  put_le(h.data() + 8, kFormatVersion, 4);
  put_le(h.data() + 12, kHeaderSize, 4);
  put_le(h.data() + 16, payload_size, 8);
  put_le(h.data() + 24, payload_crc, 4);
  put_le(h.data() + 28, 0, 4);
  put_le(h.data() + 32, crc32_update(0, h.data(), 32), 4);
  put_le(h.data() + 36, 0, 4);
  return h;
}

/// Check the container; return the payload range. Throws format_error naming the problem.
inline std::pair<const uint8_t*, std::size_t> check_container(const uint8_t* data, std::size_t n,
                                                              bool verify_checksum) {
  if (n < 8 || std::memcmp(data, kMagic, 8) != 0) {
    if (n < 8 && (n == 0 || std::memcmp(data, kMagic, n) == 0))
      throw format_error("truncated C-HNSW file: " + std::to_string(n) +
                         " bytes, shorter than the 8-byte magic");
    throw format_error("not a C-HNSW index file (bad magic header)");
  }
  if (n < kHeaderSize)
    throw format_error("truncated C-HNSW file: header needs " + std::to_string(kHeaderSize) +
                       " bytes, file has " + std::to_string(n));
  const uint32_t version = static_cast<uint32_t>(get_le(data + 8, 4));
  const uint32_t header_crc = static_cast<uint32_t>(get_le(data + 32, 4));
  if (verify_checksum && crc32_update(0, data, 32) != header_crc)
    throw format_error("corrupted C-HNSW file: header checksum mismatch");
  if (version != kFormatVersion)
    throw format_error("unsupported C-HNSW format version " + std::to_string(version) +
                       " (this build reads version " + std::to_string(kFormatVersion) + ")");
  const uint32_t hsize = static_cast<uint32_t>(get_le(data + 12, 4));
  if (hsize != kHeaderSize)
    throw format_error("corrupt C-HNSW header: header size " + std::to_string(hsize) +
                       ", expected " + std::to_string(kHeaderSize));
  // Bytes 36..39 are outside both CRCs, so a flipped bit there would otherwise go unnoticed;
  // every writer of format version 1 leaves them zero. Checked with or without verify_checksum.
  const uint32_t reserved = static_cast<uint32_t>(get_le(data + 36, 4));
  if (reserved != 0) {
    char hex[11];
    std::snprintf(hex, sizeof(hex), "0x%08x", static_cast<unsigned>(reserved));
    throw format_error(std::string("corrupt C-HNSW header: reserved bytes 36-39 must be zero, found ") +
                       hex);
  }
  const uint64_t psize = get_le(data + 16, 8);
  const uint64_t have = n - kHeaderSize;
  if (psize > have)
    throw format_error("truncated C-HNSW file: payload should be " + std::to_string(psize) +
                       " bytes, only " + std::to_string(have) + " present");
  if (psize < have)
    throw format_error("corrupt C-HNSW file: " + std::to_string(have - psize) +
                       " unexpected trailing bytes after the payload");
  const uint32_t pcrc = static_cast<uint32_t>(get_le(data + 24, 4));
  if (verify_checksum && crc32_update(0, data + kHeaderSize, static_cast<std::size_t>(psize)) != pcrc)
    throw format_error("corrupted C-HNSW file: payload checksum mismatch (CRC-32)");
  return {data + kHeaderSize, static_cast<std::size_t>(psize)};
}

// ------------------------------------------------------------------ files
inline std::vector<uint8_t> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    const int e = errno;
    throw io_error("cannot open " + path + ": " + std::strerror(e), e);
  }
  std::vector<uint8_t> buf;
  uint8_t chunk[1 << 16];
  for (;;) {
    const std::size_t got = std::fread(chunk, 1, sizeof(chunk), f);
    buf.insert(buf.end(), chunk, chunk + got);
    if (got < sizeof(chunk)) {
      if (std::ferror(f)) {
        const int e = errno;
        std::fclose(f);
        throw io_error("cannot read " + path + ": " + std::strerror(e), e);
      }
      break;
    }
  }
  std::fclose(f);
  return buf;
}

/// Write a file atomically: `body(sink)` writes the payload into a temporary file next to
/// `path`, the header is filled in, the file is flushed to disk and renamed over `path`.
/// On any error the temporary file is removed and `path` is left untouched.
template <class Body>
void write_file_atomic(const std::string& path, Body&& body) {
  std::random_device rd;
  const std::string tmp = path + ".tmp-" + std::to_string(rd()) + std::to_string(rd());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    const int e = errno;
    throw io_error("cannot create " + tmp + ": " + std::strerror(e), e);
  }
  auto fail = [](const std::string& what, int e) { throw io_error(what + ": " + std::strerror(e), e); };
  try {
    std::array<uint8_t, kHeaderSize> placeholder{};
    if (std::fwrite(placeholder.data(), 1, kHeaderSize, f) != kHeaderSize) fail("cannot write " + tmp, errno);
    FileSink sink(f, tmp);
    body(static_cast<ByteSink&>(sink));
    const auto header = make_header(sink.size(), sink.crc());
    if (std::fseek(f, 0, SEEK_SET) != 0) fail("cannot seek " + tmp, errno);
    if (std::fwrite(header.data(), 1, kHeaderSize, f) != kHeaderSize) fail("cannot write " + tmp, errno);
    if (std::fflush(f) != 0) fail("cannot flush " + tmp, errno);
#if defined(_WIN32)
    _commit(_fileno(f));
#else
    if (::fsync(fileno(f)) != 0) fail("cannot fsync " + tmp, errno);
#endif
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw io_error("cannot close " + tmp + ": " + std::strerror(e), e);
  }
#if defined(_WIN32)
  if (!MoveFileExA(tmp.c_str(), path.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
    std::remove(tmp.c_str());
    throw io_error("cannot rename " + tmp + " to " + path, EIO);
  }
#else
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    throw io_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(e), e);
  }
  // Make the rename itself durable.
  std::string dir = ".";
  const auto slash = path.find_last_of('/');
  if (slash != std::string::npos) dir = slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
#endif
}

}  // namespace chnsw
