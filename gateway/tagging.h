// S3 object tags: the x-amz-tagging header, the <Tagging> document and S3's
// limits (at most 10 tags, unique keys of 1 to 128 characters, values of at
// most 256).
#pragma once

#include <string>

#include <boost/property_tree/ptree.hpp>

#include "gateway/request.h"

namespace keel::gateway {

inline constexpr size_t kMaxTags = 10;
inline constexpr size_t kMaxBucketTags = 50;

// "k1=v1&k2=v2", URL-encoded. Throws S3Error InvalidArgument or InvalidTag.
NameValues parse_tagging_header(const std::string& header);
// A parsed <Tagging><TagSet><Tag><Key/><Value/></Tag>...</TagSet></Tagging>.
// Keys and values are taken verbatim (blanks included). Throws S3Error
// MalformedXML or InvalidTag (over max_tags, ...).
NameValues parse_tagging_document(const boost::property_tree::ptree& tree, size_t max_tags = kMaxTags);
// The <Tagging> document of these tags, ordered by key (keys are unique).
std::string tagging_document(NameValues tags);

}  // namespace keel::gateway
