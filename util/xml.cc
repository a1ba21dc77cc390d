#include "util/xml.h"

#include <cstdint>
#include <string>

namespace keel {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\r': out += "&#13;"; break;  // a raw CR would be normalised away by the reader
      case '\n': out += "&#10;"; break;
      default:
        // Other control characters as character references, as S3 writes them in keys.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t') {
          out += "&#" + std::to_string(static_cast<int>(c)) + ";";
        } else {
          out += c;
        }
    }
  }
  return out;
}

XmlWriter::XmlWriter() : out_("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n") {}

XmlWriter& XmlWriter::open(std::string_view name, std::string_view xmlns) {
  out_ += '<';
  out_ += name;
  if (!xmlns.empty()) {
    out_ += " xmlns=\"";
    out_ += xml_escape(xmlns);
    out_ += '"';
  }
  out_ += '>';
  open_.emplace_back(name);
  return *this;
}

XmlWriter& XmlWriter::close() {
  out_ += "</" + open_.back() + ">";
  open_.pop_back();
  return *this;
}

XmlWriter& XmlWriter::element(std::string_view name, std::string_view text) {
  out_ += '<';
  out_ += name;
  out_ += '>';
  out_ += xml_escape(text);
  out_ += "</";
  out_ += name;
  out_ += '>';
  return *this;
}

XmlWriter& XmlWriter::element(std::string_view name, uint64_t value) { return element(name, std::to_string(value)); }

XmlWriter& XmlWriter::element(std::string_view name, bool value) {
  return element(name, std::string_view(value ? "true" : "false"));
}

std::string XmlWriter::finish() {
  while (!open_.empty()) close();
  return std::move(out_);
}

}  // namespace keel
