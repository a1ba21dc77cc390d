#include "gateway/xml_reader.h"

#include <expat.h>

#include <memory>
#include <vector>

#include "gateway/s3_error.h"

namespace keel::gateway {

namespace {

namespace pt = boost::property_tree;

struct ParserDeleter {
  void operator()(XML_Parser parser) const { XML_ParserFree(parser); }
};

struct Builder {
  XML_Parser parser = nullptr;
  pt::ptree root;
  std::vector<pt::ptree*> open{&root};  // ptree children are list nodes: pointers stay valid
  std::string refusal;
};

void on_start(void* data, const XML_Char* name, const XML_Char**) {
  auto* b = static_cast<Builder*>(data);
  pt::ptree* parent = b->open.back();
  b->open.push_back(&parent->push_back({name, pt::ptree()})->second);
}

void on_end(void* data, const XML_Char*) { static_cast<Builder*>(data)->open.pop_back(); }

void on_text(void* data, const XML_Char* text, int length) {
  auto* b = static_cast<Builder*>(data);
  b->open.back()->data().append(text, static_cast<size_t>(length));
}

// Entities declared in a DOCTYPE are how XML bombs and external reads come in;
// no S3 body has one.
void on_doctype(void* data, const XML_Char*, const XML_Char*, const XML_Char*, int) {
  auto* b = static_cast<Builder*>(data);
  b->refusal = "a DOCTYPE is not allowed";
  XML_StopParser(b->parser, XML_FALSE);
}

}  // namespace

pt::ptree read_xml_body(std::string_view body) {
  std::unique_ptr<XML_ParserStruct, ParserDeleter> parser(XML_ParserCreate("UTF-8"));
  if (!parser) throw S3Error("InternalError", "cannot create an XML parser");
  Builder builder;
  builder.parser = parser.get();
  XML_SetUserData(parser.get(), &builder);
  XML_SetElementHandler(parser.get(), on_start, on_end);
  XML_SetCharacterDataHandler(parser.get(), on_text);
  XML_SetStartDoctypeDeclHandler(parser.get(), on_doctype);
  if (body.size() > static_cast<size_t>(INT32_MAX)) throw S3Error("MalformedXML", "the XML body is too large");
  if (XML_Parse(parser.get(), body.data(), static_cast<int>(body.size()), XML_TRUE) != XML_STATUS_OK) {
    const std::string why = builder.refusal.empty() ? XML_ErrorString(XML_GetErrorCode(parser.get()))
                                                    : builder.refusal;
    throw S3Error("MalformedXML", "the XML you provided was not well-formed or did not validate: " + why +
                                      " (line " + std::to_string(XML_GetCurrentLineNumber(parser.get())) + ")");
  }
  return std::move(builder.root);
}

std::string xml_value(const pt::ptree& tree, const std::string& path, const std::string& fallback) {
  const auto child = tree.get_child_optional(path);
  if (!child) return fallback;
  const std::string& text = child->data();
  constexpr std::string_view kBlanks = " \t\r\n";
  const size_t begin = text.find_first_not_of(kBlanks);
  if (begin == std::string::npos) return {};
  return text.substr(begin, text.find_last_not_of(kBlanks) - begin + 1);
}

}  // namespace keel::gateway
