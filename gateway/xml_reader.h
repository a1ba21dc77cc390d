// Reading the XML bodies of S3 requests (DeleteObjects, CompleteMultipartUpload,
// tagging, retention, legal hold, lock and versioning configurations) into a
// property tree whose text is exactly what the document holds: S3 keys and
// tag values are any UTF-8, and leading, trailing and all-blank ones are
// ordinary, so nothing is trimmed. Enumerated values (Status, Mode, ...) are
// read through xml_value, which ignores surrounding blanks as AWS does.
#pragma once

#include <string>
#include <string_view>

#include <boost/property_tree/ptree.hpp>

namespace keel::gateway {

// Elements become children named as in the document (attributes are
// dropped), each holding its own character data verbatim, entities and
// character references decoded. A DOCTYPE is refused. Throws S3Error
// MalformedXML.
boost::property_tree::ptree read_xml_body(std::string_view body);

// The text at `path` without surrounding blanks, or `fallback` when absent.
std::string xml_value(const boost::property_tree::ptree& tree, const std::string& path,
                      const std::string& fallback = "");

}  // namespace keel::gateway
