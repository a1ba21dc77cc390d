#include "gateway/rfc2047.h"

#include <algorithm>
#include <optional>

#include "util/bytes.h"
#include "util/error.h"
#include "util/text.h"

namespace keel::gateway {

namespace {

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      length = 2, code = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      length = 3, code = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      length = 4, code = c & 0x07;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
    if ((length == 3 && code < 0x800) || (length == 4 && (code < 0x10000 || code > 0x10ffff)) ||
        (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += length;
  }
  return true;
}

std::string latin1_to_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x80) {
      out += ch;
    } else {
      out += static_cast<char>(0xc0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3f));
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// RFC 2047 section 4.2: '_' is a blank, =XX a byte, any other printable character itself.
std::optional<std::string> decode_q(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '_') {
      out += ' ';
    } else if (text[i] == '=') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = hex_value(text[i + 1]), low = hex_value(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The UTF-8 text of one encoded-word "=?charset?X?text?=", or nullopt when `word` is not one
// this decoder reads.
std::optional<std::string> decode_word(std::string_view word) {
  if (word.size() < 8 || !word.starts_with("=?") || !word.ends_with("?=")) return std::nullopt;
  const std::string_view inner = word.substr(2, word.size() - 4);
  const size_t first = inner.find('?');
  if (first == std::string_view::npos || first + 2 >= inner.size() || inner[first + 2] != '?') return std::nullopt;
  std::string charset = ascii_lower(inner.substr(0, first));
  if (const size_t star = charset.find('*'); star != std::string::npos) charset.resize(star);  // RFC 2231 language
  const char encoding = inner[first + 1];
  const std::string_view text = inner.substr(first + 3);
  if (text.empty() || text.find('?') != std::string_view::npos) return std::nullopt;
  std::optional<std::string> bytes;
  if (encoding == 'B' || encoding == 'b') {
    try {
      const Bytes decoded = from_base64(text);
      bytes = std::string(as_chars(decoded));
    } catch (const Error&) {
      return std::nullopt;
    }
  } else if (encoding == 'Q' || encoding == 'q') {
    bytes = decode_q(text);
  }
  if (!bytes) return std::nullopt;
  if (charset == "utf-8" || charset == "utf8") return is_valid_utf8(*bytes) ? bytes : std::nullopt;
  if (charset == "us-ascii") return is_ascii(*bytes) ? bytes : std::nullopt;
  if (charset == "iso-8859-1" || charset == "latin1") return latin1_to_utf8(*bytes);
  return std::nullopt;
}

}  // namespace

std::string decode_metadata_value(std::string_view value) {
  std::string out;
  bool previous_was_word = false;
  size_t at = 0;
  while (at < value.size()) {
    const size_t blank_end = std::min(value.find_first_not_of(" \t", at), value.size());
    const std::string_view blanks = value.substr(at, blank_end - at);
    if (blank_end == value.size()) {
      out += blanks;
      break;
    }
    const size_t token_end = std::min(value.find_first_of(" \t", blank_end), value.size());
    const std::string_view token = value.substr(blank_end, token_end - blank_end);
    if (const auto decoded = decode_word(token)) {
      if (!previous_was_word) out += blanks;  // blanks between two encoded-words are not text
      out += *decoded;
      previous_was_word = true;
    } else {
      out += blanks;
      out += is_valid_utf8(token) ? std::string(token) : latin1_to_utf8(token);
      previous_was_word = false;
    }
    at = token_end;
  }
  return out;
}

std::string encode_metadata_value(std::string_view value) {
  // S3 encodes as javax.mail's MimeUtility.encodeText does (its conformance tests expect
  // "\x04mymeta" back as "=?UTF-8?Q?=04mymeta?="): a character is "not text" when it is a
  // control character other than a tab, DEL or outside ASCII, counted in UTF-16 units; a value
  // without one goes as it is, one mostly of text as a Q word, any other as a B word.
  const auto is_text = [](unsigned char c) { return (c >= 0x20 && c < 0x7f) || c == '\t'; };
  size_t text = 0, other = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (is_text(c)) {
      ++text;
    } else if (c < 0x80 || (c & 0xc0) == 0xc0) {  // a control character, or a UTF-8 lead byte
      other += c >= 0xf0 ? 2 : 1;                    // past U+FFFF: two UTF-16 units
    }
  }
  if (other == 0) return std::string(value);
  if (text <= other) return "=?UTF-8?B?" + to_base64(as_bytes(value)) + "?=";
  // RFC 2047 section 4.2 with MimeUtility's choice of specials for text: "=", "_" and "?".
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "=?UTF-8?Q?";
  for (const char ch : value) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == ' ') {
      out += '_';
    } else if (!is_text(c) || c == '\t' || c == '=' || c == '_' || c == '?') {
      out += '=';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += ch;
    }
  }
  return out + "?=";
}

}  // namespace keel::gateway
