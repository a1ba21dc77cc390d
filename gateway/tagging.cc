#include "gateway/tagging.h"

#include <algorithm>
#include <set>

#include "gateway/s3_api_util.h"
#include "gateway/s3_error.h"
#include "util/xml.h"

namespace keel::gateway {

namespace {

// Characters, not bytes: S3 counts Unicode code points.
size_t utf8_length(const std::string& text) {
  size_t count = 0;
  for (const char c : text) count += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return count;
}

NameValues checked(NameValues tags, size_t max_tags = kMaxTags) {
  if (tags.size() > max_tags) {
    throw S3Error("InvalidTag", "at most " + std::to_string(max_tags) + " tags, not " + std::to_string(tags.size()));
  }
  std::set<std::string> keys;
  for (const auto& [key, value] : tags) {
    if (key.empty() || utf8_length(key) > 128) throw S3Error("InvalidTag", "a tag key has 1 to 128 characters");
    if (utf8_length(value) > 256) throw S3Error("InvalidTag", "the value of tag '" + key + "' is over 256 characters");
    if (!keys.insert(key).second) throw S3Error("InvalidTag", "the tag key '" + key + "' is given twice");
  }
  return tags;
}

}  // namespace

NameValues parse_tagging_header(const std::string& header) {
  NameValues tags;
  size_t start = 0;
  while (start < header.size()) {
    size_t end = header.find('&', start);
    if (end == std::string::npos) end = header.size();
    const std::string pair = header.substr(start, end - start);
    const size_t eq = pair.find('=');
    tags.emplace_back(percent_decode(pair.substr(0, eq)), eq == std::string::npos ? "" : percent_decode(pair.substr(eq + 1)));
    start = end + 1;
  }
  return checked(std::move(tags));
}

NameValues parse_tagging_document(const boost::property_tree::ptree& tree, size_t max_tags) {
  const auto set = tree.get_child_optional("Tagging.TagSet");
  if (!set) throw S3Error("MalformedXML", "the body is not a <Tagging> document with a <TagSet>");
  NameValues tags;
  for (const auto& [name, tag] : *set) {
    if (name != "Tag") continue;
    const auto key = tag.get_optional<std::string>("Key");
    if (!key) throw S3Error("MalformedXML", "a <Tag> without a <Key>");
    tags.emplace_back(*key, tag.get("Value", ""));
  }
  return checked(std::move(tags), max_tags);
}

std::string tagging_document(NameValues tags) {
  // Ordered by key (bytes), whatever order they came in, as S3 and RGW answer them.
  std::sort(tags.begin(), tags.end());
  XmlWriter xml;
  xml.open("Tagging", kS3Namespace).open("TagSet");
  for (const auto& [key, value] : tags) xml.open("Tag").element("Key", key).element("Value", value).close();
  return xml.finish();
}

}  // namespace keel::gateway
