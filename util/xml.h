// Writing XML documents: S3 request and response bodies. Reading them goes
// through boost::property_tree's parser where needed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace keel {

// Escapes &, <, >, " and ' for text and attribute values.
std::string xml_escape(std::string_view text);

// A streaming writer: elements open and close in order, text is escaped.
class XmlWriter {
 public:
  // Starts with the XML declaration.
  XmlWriter();
  // `xmlns` becomes the element's namespace attribute when not empty.
  XmlWriter& open(std::string_view name, std::string_view xmlns = {});
  XmlWriter& close();
  // <name>text</name>
  XmlWriter& element(std::string_view name, std::string_view text);
  XmlWriter& element(std::string_view name, uint64_t value);
  XmlWriter& element(std::string_view name, bool value);
  XmlWriter& element(std::string_view name, const char* text) { return element(name, std::string_view(text)); }
  XmlWriter& element(std::string_view name, const std::string& text) { return element(name, std::string_view(text)); }
  // Closes every open element and returns the document.
  std::string finish();

 private:
  std::string out_;
  std::vector<std::string> open_;
};

}  // namespace keel
