// User metadata values (x-amz-meta-*) as S3 takes and gives them: RFC 2047
// encoded-words are decoded before a value is stored, and a stored value
// outside printable US-ASCII goes out as one "=?UTF-8?Q?...?=" or
// "=?UTF-8?B?...?=" encoded-word, as S3 sends it.
#pragma once

#include <string>
#include <string_view>

namespace keel::gateway {

// The value to store for a received x-amz-meta-* header value, in UTF-8: each
// RFC 2047 encoded-word (=?charset?B?base64?= or =?charset?Q?text?=, charset
// UTF-8, US-ASCII or ISO-8859-1, any case) decoded, the blanks between two
// adjacent encoded-words dropped; an encoded-word that is malformed or names
// another charset stays as sent. Other bytes above 0x7F stay as sent when they
// are valid UTF-8 and are read as ISO-8859-1 (HTTP's header charset) when not.
std::string decode_metadata_value(std::string_view value);

// The header value S3 sends for a stored value: as stored when it is printable
// US-ASCII (tabs allowed), else one RFC 2047 encoded-word of its UTF-8 bytes,
// "Q" when most of its characters are printable ASCII, else "B".
std::string encode_metadata_value(std::string_view value);

}  // namespace keel::gateway
