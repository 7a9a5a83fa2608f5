#include "arrayrecord/options.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <vector>

#include "errors.h"

namespace arrayds {
namespace {

struct Item {
  std::string key;
  std::string value;
};

std::vector<Item> split_items(const std::string& text) {
  std::vector<Item> items;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    if (!item.empty()) {
      const size_t colon = item.find(':');
      if (colon == std::string::npos) {
        items.push_back({item, ""});
      } else {
        items.push_back({item.substr(0, colon), item.substr(colon + 1)});
      }
    }
    start = comma + 1;
  }
  return items;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && is_space(s[a])) ++a;
  while (b > a && is_space(s[b - 1])) --b;
  return s.substr(a, b - a);
}

// Decimal integer with optional sign and surrounding spaces (like absl::SimpleAtoi).
bool parse_int(const std::string& text, int64_t& out) {
  const std::string s = trim(text);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size()) return false;
  uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (static_cast<uint64_t>(INT64_MAX) - d) / 10) return false;
    v = v * 10 + d;
  }
  out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

// A real number with an optional suffix B k K M G T P E ("1.5k" = 1536).
bool parse_bytes(const std::string& text, uint64_t& out) {
  std::string s = trim(text);
  if (s.empty()) return false;
  double mult = 1;
  const std::string suffixes = "BkKMGTPE";
  const size_t pos = suffixes.find(s.back());
  if (pos != std::string::npos) {
    static const double kMult[] = {1.0, 1024.0, 1024.0, 1048576.0, 1073741824.0,
                                   1099511627776.0, 1125899906842624.0,
                                   1152921504606846976.0};
    mult = kMult[pos];
    s = trim(s.substr(0, s.size() - 1));
  }
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || c == '.' || c == '+' || c == '-')) return false;
  }
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(d) || d < 0) return false;
  const double v = std::round(d * mult);
  if (v >= 18446744073709551615.0) return false;
  out = static_cast<uint64_t>(v);
  return true;
}

std::string shown(const std::string& value) { return value.empty() ? "(empty)" : value; }

[[noreturn]] void invalid(const std::string& key, const std::string& value,
                          const std::string& valid) {
  throw OptionsError("Option " + key + ": invalid value: " + shown(value) +
                     ", valid values: " + valid);
}

std::string range(int64_t lo, int64_t hi) {
  return "integers in the range [" + std::to_string(lo) + ".." + std::to_string(hi) + "]";
}

int64_t int_in(const std::string& key, const std::string& value, int64_t lo, int64_t hi,
               const std::string& prefix) {
  int64_t v;
  if (!parse_int(value, v) || v < lo || v > hi) invalid(key, value, prefix + range(lo, hi));
  return v;
}

bool parse_bool(const std::string& key, const std::string& value) {
  if (value.empty() || value == "true" || value == "false") return value == "true";
  invalid(key, value, "(empty), true, false");
}

const char* kWriterKeys =
    "default, group_size, max_parallelism, saturation_delay_ms, transpose, "
    "transpose_bucket_size, uncompressed, brotli, zstd, snappy, window_log, "
    "pad_to_block_boundary";

constexpr int64_t kInt32Max = 2147483647;

}  // namespace

WriterOptions WriterOptions::parse(const std::string& text) {
  WriterOptions o;
  std::set<std::string> seen;
  std::string compression_key;  // the compression key given, if any
  bool window_log_given = false;
  std::string window_log_value;
  bool first = true;
  static const std::set<std::string> kKeys = {
      "default", "group_size", "max_parallelism", "saturation_delay_ms", "transpose",
      "transpose_bucket_size", "uncompressed", "brotli", "zstd", "snappy", "window_log",
      "pad_to_block_boundary"};
  for (const Item& item : split_items(text)) {
    const std::string& key = item.key;
    const std::string& value = item.value;
    if (kKeys.count(key) == 0) {
      throw OptionsError("Unknown option " + key + ", valid options: " + kWriterKeys);
    }
    if (!seen.insert(key).second) {
      throw OptionsError("Option " + key + " is present more than once");
    }
    const bool was_first = first;
    first = false;
    if (key == "default") {
      if (!was_first) throw OptionsError("Option default must be first");
      if (!value.empty()) invalid(key, value, "(empty)");
    } else if (key == "group_size") {
      o.group_size = static_cast<uint64_t>(int_in(key, value, 1, kInt32Max, ""));
    } else if (key == "max_parallelism") {
      if (trim(value) != "auto") {
        o.max_parallelism = static_cast<uint64_t>(int_in(key, value, 1, kInt32Max, "auto, "));
      }
    } else if (key == "saturation_delay_ms") {
      int_in(key, value, 1, kInt32Max, "");  // accepted and ignored, like the wheel
    } else if (key == "transpose") {
      if (parse_bool(key, value) || value.empty()) {
        throw OptionsError(
            "Option transpose: transposed chunks are not supported by arrayds, which "
            "writes simple chunks only; remove the option or use transpose:false");
      }
    } else if (key == "transpose_bucket_size") {
      uint64_t v;
      if (trim(value) != "auto" && (!parse_bytes(value, v) || v < 1)) {
        invalid(key, value,
                "auto, integers expressed as reals with optional suffix [BkKMGTPE], in the "
                "range [1..18446744073709551615]");
      }
    } else if (key == "uncompressed" || key == "brotli" || key == "zstd" || key == "snappy") {
      if (!compression_key.empty()) {
        throw OptionsError("Option " + key + " conflicts with option " + compression_key);
      }
      if (window_log_given && (key == "uncompressed" || key == "snappy")) {
        throw OptionsError("Option " + key + " conflicts with option window_log");
      }
      compression_key = key;
      if (key == "uncompressed") {
        if (!value.empty()) invalid(key, value, "(empty)");
        o.compression.type = Compression::kNone;
        o.compression.level = 0;
      } else if (key == "brotli") {
        o.compression.type = Compression::kBrotli;
        o.compression.level = value.empty() ? 6 : static_cast<int>(int_in(key, value, 0, 11,
                                                                          "(empty), "));
      } else if (key == "zstd") {
        o.compression.type = Compression::kZstd;
        o.compression.level =
            value.empty() ? 3 : static_cast<int>(int_in(key, value, -131072, 22, "(empty), "));
      } else {
        o.compression.type = Compression::kSnappy;
        o.compression.level = 0;
        if (!value.empty()) int_in(key, value, 1, 2, "(empty), ");
      }
    } else if (key == "window_log") {
      if (compression_key == "uncompressed" || compression_key == "snappy") {
        throw OptionsError("Option window_log conflicts with option " + compression_key);
      }
      window_log_given = true;
      window_log_value = value;
      if (trim(value) != "auto") int_in(key, value, 10, 31, "auto, ");
    } else if (key == "pad_to_block_boundary") {
      o.pad_to_block_boundary = parse_bool(key, value);
    }
  }
  if (window_log_given && trim(window_log_value) != "auto") {
    const int64_t hi = o.compression.type == Compression::kBrotli ? 30 : 31;
    o.compression.window_log =
        static_cast<int>(int_in("window_log", window_log_value, 10, hi, "auto, "));
    o.window_log_set = true;
  }
  return o;
}

std::string WriterOptions::canonical() const {
  std::string s = "group_size:" + std::to_string(group_size) +
                  ",transpose:false,pad_to_block_boundary:" +
                  (pad_to_block_boundary ? "true" : "false");
  switch (compression.type) {
    case Compression::kNone:
      s += ",uncompressed";
      break;
    case Compression::kBrotli:
      s += ",brotli:" + std::to_string(compression.level);
      if (window_log_set) s += ",window_log:" + std::to_string(compression.window_log);
      break;
    case Compression::kZstd:
      s += ",zstd:" + std::to_string(compression.level) + ",window_log:" +
           std::to_string(window_log_set ? compression.window_log : 20);
      break;
    case Compression::kSnappy:
      s += ",snappy";
      break;
  }
  s += ",max_parallelism:1";
  return s;
}

ReaderOptions ReaderOptions::parse(const std::string& text) {
  ReaderOptions o;
  std::set<std::string> seen;
  constexpr uint64_t kGiB = 1u << 30;
  for (const Item& item : split_items(text)) {
    const std::string& key = item.key;
    const std::string& value = item.value;
    if (key != "readahead_buffer_size" && key != "max_parallelism" &&
        key != "index_storage_option" && key != "footer_prefetch_bytes") {
      throw OptionsError("Unknown option " + key +
                         ", valid options: readahead_buffer_size, max_parallelism, "
                         "index_storage_option, footer_prefetch_bytes");
    }
    if (!seen.insert(key).second) {
      throw OptionsError("Option " + key + " is present more than once");
    }
    const std::string bytes_valid =
        "auto, integers expressed as reals with optional suffix [BkKMGTPE], in the range "
        "[0..1073741824]";
    if (key == "readahead_buffer_size" || key == "footer_prefetch_bytes") {
      uint64_t v = 0;
      if (trim(value) == "auto") continue;
      if (!parse_bytes(value, v) || v > kGiB) invalid(key, value, bytes_valid);
      if (key == "readahead_buffer_size") {
        o.readahead_buffer_size = v;
        o.readahead_set = true;
      } else {
        o.footer_prefetch_bytes = v;
      }
    } else if (key == "max_parallelism") {
      if (trim(value) != "auto") o.max_parallelism = int_in(key, value, 0, kInt32Max, "auto, ");
    } else {
      if (value.empty() || value == "in_memory") {
        o.index_storage = IndexStorage::kInMemory;
      } else if (value == "offloaded") {
        o.index_storage = IndexStorage::kOffloaded;
      } else {
        invalid(key, value, "(empty), in_memory, offloaded");
      }
    }
  }
  return o;
}

}  // namespace arrayds
