// S3 semantics of keel gateway below the HTTP layer: XML bodies read
// verbatim (keys with blanks), conditional requests, copy sources and
// ranges, parts of multipart objects, listing with max-keys=0 and
// encoding-type=url, RFC 2047 user metadata, tag order.
#include <catch2/catch.hpp>

#include "gateway/conditional.h"
#include "gateway/http_date.h"
#include "gateway/payload_checks.h"
#include "gateway/rfc2047.h"
#include "gateway/s3_api_util.h"
#include "gateway/s3_error.h"
#include "gateway/tagging.h"
#include "gateway/xml_reader.h"
#include "tests/unit/s3_error_code.h"
#include "util/crc.h"
#include "util/xml.h"

using namespace keel;
using namespace keel::gateway;
using keel::test::error_code;

namespace {

S3Request with_headers(NameValues headers) {
  S3Request r;
  r.key = "k";
  r.headers = std::move(headers);
  return r;
}

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kModified = 1'700'000'000 * kSecond;  // Tue, 14 Nov 2023 22:13:20 GMT

}  // namespace

TEST_CASE("xml bodies: keys and tag values keep their blanks, enumerations do not", "[gateway][semantics]") {
  // DeleteObjects: the key "_ " is not "_", and " " is a key.
  const auto del = read_xml_body(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
      "  <Object><Key>_ </Key></Object>\n  <Object><Key> </Key><VersionId> v1 </VersionId></Object>\n"
      "  <Object><Key>\t a&amp;b &#x20;</Key></Object>\n  <Object><Key>ünï  </Key></Object>\n"
      "  <Quiet> true </Quiet>\n</Delete>");
  std::vector<std::string> keys;
  for (const auto& [name, child] : del.get_child("Delete")) {
    if (name == "Object") keys.push_back(child.get<std::string>("Key"));
  }
  CHECK(keys == std::vector<std::string>{"_ ", " ", "\t a&b  ", "ünï  "});
  CHECK(xml_value(del, "Delete.Quiet") == "true");
  CHECK(xml_value(del.get_child("Delete").back().second, "Key", "none") == "none");  // Quiet has no Key

  // CompleteMultipartUpload: ETags and checksums trimmed, numbers read.
  const auto complete = read_xml_body(
      "<CompleteMultipartUpload><Part>\n <PartNumber> 2 </PartNumber>\n <ETag>\n \"abc\" \n</ETag>"
      "<ChecksumCRC32> AAAAAA== </ChecksumCRC32></Part></CompleteMultipartUpload>");
  const auto& part = complete.get_child("CompleteMultipartUpload.Part");
  CHECK(part.get<int>("PartNumber") == 2);
  CHECK(xml_value(part, "ETag") == "\"abc\"");
  CHECK(xml_value(part, checksum_element("crc32")) == "AAAAAA==");

  // Tagging: keys and values verbatim.
  const auto tags = parse_tagging_document(read_xml_body(
      "<Tagging><TagSet><Tag><Key> k </Key><Value>  </Value></Tag><Tag><Key>k</Key><Value> v</Value></Tag>"
      "</TagSet></Tagging>"));
  CHECK(tags == NameValues{{" k ", "  "}, {"k", " v"}});
  CHECK(error_code([] { parse_tagging_document(read_xml_body("<Tagging><TagSet><Tag><Key></Key></Tag></TagSet></Tagging>")); }) ==
        "InvalidTag");

  // Retention, legal hold, lock configuration and versioning: enumerations trimmed.
  const auto retention = read_xml_body("<Retention>\n <Mode> GOVERNANCE\n</Mode>\n"
                                       " <RetainUntilDate>2030-01-01T00:00:00Z </RetainUntilDate></Retention>");
  CHECK(xml_value(retention, "Retention.Mode") == "GOVERNANCE");
  CHECK(xml_value(retention, "Retention.RetainUntilDate") == "2030-01-01T00:00:00Z");
  CHECK(xml_value(read_xml_body("<LegalHold><Status>\tON\n</Status></LegalHold>"), "LegalHold.Status") == "ON");
  const auto lock = read_xml_body("<ObjectLockConfiguration><ObjectLockEnabled> Enabled </ObjectLockEnabled><Rule>"
                                  "<DefaultRetention><Mode>COMPLIANCE</Mode><Days> 3 </Days></DefaultRetention>"
                                  "</Rule></ObjectLockConfiguration>");
  CHECK(xml_value(lock, "ObjectLockConfiguration.ObjectLockEnabled") == "Enabled");
  CHECK(lock.get<int>("ObjectLockConfiguration.Rule.DefaultRetention.Days") == 3);
  CHECK(xml_value(read_xml_body("<VersioningConfiguration>\n<Status>Suspended</Status>\n</VersioningConfiguration>"),
                  "VersioningConfiguration.Status") == "Suspended");
  CHECK(xml_value(read_xml_body("<CreateBucketConfiguration><LocationConstraint> eu-west-1 </LocationConstraint>"
                                "</CreateBucketConfiguration>"),
                  "CreateBucketConfiguration.LocationConstraint") == "eu-west-1");
}

TEST_CASE("xml responses: control characters in keys go out as character references", "[gateway][semantics]") {
  CHECK(xml_escape(std::string("a\x01\n\tb\r<")) == "a&#1;&#10;\tb&#13;&lt;");
}

TEST_CASE("xml bodies: malformed documents and DOCTYPEs are MalformedXML", "[gateway][semantics]") {
  CHECK(error_code([] { read_xml_body("<Delete><Object><Key>a</Object></Delete>"); }) == "MalformedXML");
  CHECK(error_code([] { read_xml_body(""); }) == "MalformedXML");
  CHECK(error_code([] { read_xml_body("<a>&#1;</a>"); }) == "MalformedXML");
  CHECK(error_code([] {
          read_xml_body("<!DOCTYPE d [<!ENTITY x \"xxxxxxxx\"><!ENTITY y \"&x;&x;&x;&x;\">]><Delete>&y;</Delete>");
        }) == "MalformedXML");
}

TEST_CASE("conditional reads: RFC 7232 as S3 applies it", "[gateway][semantics]") {
  const std::string etag = "0123abcd";
  const std::string before = "Tue, 14 Nov 2023 21:13:20 GMT", at = "Tue, 14 Nov 2023 22:13:20 GMT",
                    after = "Tue, 14 Nov 2023 23:13:20 GMT";
  CHECK(parse_http_date(at) == kModified / kSecond);
  CHECK(parse_http_date("Tuesday, 14-Nov-23 22:13:20 GMT") == kModified / kSecond);
  CHECK(parse_http_date("yesterday") < 0);
  const auto allow = [&](NameValues headers) { return read_conditions_allow(with_headers(std::move(headers)), etag, kModified); };
  CHECK(allow({}));
  CHECK(allow({{"if-match", "\"0123abcd\""}}));
  CHECK(allow({{"if-match", "\"x\", W/\"0123abcd\""}}));
  CHECK(allow({{"if-match", "*"}}));
  CHECK(error_code([&] { allow({{"if-match", "\"x\""}}); }) == "PreconditionFailed");
  CHECK_FALSE(allow({{"if-none-match", "\"0123abcd\""}}));
  CHECK(allow({{"if-none-match", "\"x\""}}));
  CHECK_FALSE(allow({{"if-modified-since", at}}));
  CHECK_FALSE(allow({{"if-modified-since", after}}));
  CHECK(allow({{"if-modified-since", before}}));
  CHECK(allow({{"if-modified-since", "not a date"}}));  // ignored, as S3
  CHECK(error_code([&] { allow({{"if-unmodified-since", before}}); }) == "PreconditionFailed");
  CHECK(allow({{"if-unmodified-since", at}}));
  // If-Match true overrides If-Unmodified-Since false; If-None-Match false overrides If-Modified-Since.
  CHECK(allow({{"if-match", "\"0123abcd\""}, {"if-unmodified-since", before}}));
  CHECK(allow({{"if-none-match", "\"x\""}, {"if-modified-since", after}}));
}

TEST_CASE("conditional copies and writes", "[gateway][semantics]") {
  const std::string etag = "0123abcd";
  const auto copy = [&](NameValues headers) {
    check_copy_source_conditions(with_headers(std::move(headers)), etag, kModified);
  };
  copy({{"x-amz-copy-source-if-match", "\"0123abcd\""}, {"x-amz-copy-source-if-unmodified-since", "Tue, 14 Nov 2023 21:00:00 GMT"}});
  copy({{"x-amz-copy-source-if-none-match", "\"x\""}, {"x-amz-copy-source-if-modified-since", "Wed, 15 Nov 2023 00:00:00 GMT"}});
  CHECK(error_code([&] { copy({{"x-amz-copy-source-if-match", "\"x\""}}); }) == "PreconditionFailed");
  CHECK(error_code([&] { copy({{"x-amz-copy-source-if-none-match", "*"}}); }) == "PreconditionFailed");
  CHECK(error_code([&] { copy({{"x-amz-copy-source-if-modified-since", "Wed, 15 Nov 2023 00:00:00 GMT"}}); }) ==
        "PreconditionFailed");
  CHECK(error_code([&] { copy({{"x-amz-copy-source-if-unmodified-since", "Tue, 14 Nov 2023 21:00:00 GMT"}}); }) ==
        "PreconditionFailed");

  ObjectRecord current;
  current.etag = etag;
  const std::optional<ObjectRecord> none, marker = [] {
    ObjectRecord m;
    m.delete_marker = true;
    return m;
  }();
  const auto write = [&](NameValues headers, const std::optional<ObjectRecord>& existing) {
    check_write_conditions(with_headers(std::move(headers)), existing);
  };
  write({{"if-none-match", "*"}}, none);
  write({{"if-none-match", "*"}}, marker);
  CHECK(error_code([&] { write({{"if-none-match", "*"}}, current); }) == "PreconditionFailed");
  write({{"if-none-match", "\"x\""}}, none);
  write({{"if-none-match", "\"x\", \"y\""}}, current);
  CHECK(error_code([&] { write({{"if-none-match", "\"x\", \"0123abcd\""}}, current); }) == "PreconditionFailed");
  write({{"if-match", "*"}}, current);
  CHECK(error_code([&] { write({{"if-match", "*"}}, none); }) == "NoSuchKey");
  CHECK(error_code([&] { write({{"if-match", "*"}}, marker); }) == "NoSuchKey");
  write({{"if-match", "\"0123abcd\""}}, current);
  CHECK(error_code([&] { write({{"if-match", "\"x\""}}, current); }) == "PreconditionFailed");
  CHECK(error_code([&] { write({{"if-match", "\"0123abcd\""}}, none); }) == "NoSuchKey");
  CHECK(error_code([&] {
          check_write_conditions(with_headers({{"if-none-match", "*"}}), current, "ConditionalRequestConflict");
        }) == "ConditionalRequestConflict");
  CHECK_FALSE(has_write_conditions(with_headers({})));
}

TEST_CASE("conditional deletes: ETag, modification time and size of the version deleted", "[gateway][semantics]") {
  ObjectRecord version;
  version.etag = "0123abcd";
  version.size = 5;
  version.modified_ns = kModified + 400'000'000;  // compared to the second, as Last-Modified shows it
  ObjectRecord marker = version;
  marker.delete_marker = true;
  const auto check = [](const DeleteConditions& c, const std::optional<ObjectRecord>& target) {
    return error_code([&] { check_delete_conditions(c, target); });
  };
  const auto headers = [](NameValues h) { return DeleteConditions::from_headers(with_headers(std::move(h))); };
  CHECK(check(headers({{"if-match", "\"0123abcd\""}, {"x-amz-if-match-size", "5"},
                       {"x-amz-if-match-last-modified-time", "Tue, 14 Nov 2023 22:13:20 GMT"}}),
              version).empty());
  CHECK(check(headers({{"if-match", "badetag"}}), version) == "PreconditionFailed");
  CHECK(check(headers({{"x-amz-if-match-size", "9999"}}), version) == "PreconditionFailed");
  CHECK(check(headers({{"x-amz-if-match-last-modified-time", "Thu, 01 Jan 2015 00:00:00 GMT"}}), version) ==
        "PreconditionFailed");
  // Deleting nothing succeeds whatever the conditions.
  CHECK(check(headers({{"if-match", "badetag"}, {"x-amz-if-match-size", "9999"}}), std::nullopt).empty());
  // A current delete marker: no ETag, size 0; only * passes.
  CHECK(check(headers({{"if-match", "*"}}), marker).empty());
  CHECK(check(headers({{"if-match", "\"0123abcd\""}}), marker) == "PreconditionFailed");
  CHECK(check(headers({{"x-amz-if-match-size", "5"}}), marker) == "PreconditionFailed");
  // DeleteObjects entries: ISO 8601 dates.
  CHECK(check(DeleteConditions::from_entry("\"0123abcd\"", "2023-11-14T22:13:20.000Z", "5"), version).empty());
  CHECK(check(DeleteConditions::from_entry("", "2015-01-01T00:00:00Z", ""), version) == "PreconditionFailed");
  CHECK(error_code([] { DeleteConditions::from_entry("", "", "five"); }) == "InvalidArgument");
  CHECK(error_code([&] { headers({{"x-amz-if-match-last-modified-time", "yesterday"}}); }) == "InvalidArgument");
}

TEST_CASE("copy sources and copy ranges", "[gateway][semantics]") {
  const CopySource question = parse_copy_source("/bucket/a%3Fb%20%2Bc?versionId=v%2B1");
  CHECK(question.bucket == "bucket");
  CHECK(question.key == "a?b +c");
  CHECK(question.version_id == "v+1");
  CHECK(parse_copy_source("bucket/%20").key == " ");
  CHECK(parse_copy_source("bucket/..").key == "..");
  CHECK(error_code([] { parse_copy_source("bucket/k?other=1"); }) == "InvalidArgument");

  const ByteRange range = parse_copy_source_range("bytes=2-9", 10);
  CHECK((range.first == 2 && range.length == 8));
  CHECK(error_code([] { parse_copy_source_range("bytes=5-10", 10); }) == "InvalidRange");
  CHECK(error_code([] { parse_copy_source_range("bytes=5-", 10); }) == "InvalidArgument");
  CHECK(error_code([] { parse_copy_source_range("bytes=6-5", 10); }) == "InvalidArgument");
}

TEST_CASE("parts of multipart objects and checksum types", "[gateway][semantics]") {
  ObjectRecord multipart;
  multipart.etag = "abc-3";
  multipart.segments = {{"a", 10}, {"b", 20}, {"c", 5}};
  multipart.size = 35;
  CHECK(multipart_parts(multipart) == 3);
  const auto second = part_range(multipart, "2");
  REQUIRE(second);
  CHECK((second->first == 10 && second->length == 20));
  CHECK(error_code([&] { part_range(multipart, "4"); }) == "InvalidPartNumber");
  CHECK(error_code([&] { part_range(multipart, "0"); }) == "InvalidArgument");

  ObjectRecord single;
  single.etag = "abc";
  single.segments = {{"a", 10}};
  CHECK(multipart_parts(single) == 0);
  CHECK_FALSE(part_range(single, "1"));
  CHECK(error_code([&] { part_range(single, "2"); }) == "InvalidPartNumber");

  single.checksum = "AAAAAA==";
  CHECK(checksum_type(single) == "FULL_OBJECT");
  multipart.checksum = "AAAAAA==-3";
  CHECK(checksum_type(multipart) == "COMPOSITE");
  CHECK(checksum_element("crc64nvme") == "ChecksumCRC64NVME");
}

TEST_CASE("crc_combine: the CRC of two pieces from theirs, for full-object multipart checksums", "[gateway][semantics]") {
  Bytes data(100000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + (i >> 7));
  for (const auto algorithm : {CrcAlgorithm::kCrc32, CrcAlgorithm::kCrc32c, CrcAlgorithm::kCrc64Nvme}) {
    for (const size_t split : {size_t{0}, size_t{1}, size_t{4097}, data.size()}) {
      const ByteView all(data.data(), data.size());
      const uint64_t a = crc(algorithm, all.subspan(0, split)), b = crc(algorithm, all.subspan(split));
      CHECK(crc_combine(algorithm, a, b, data.size() - split) == crc(algorithm, all));
    }
  }
}

TEST_CASE("listing: max-keys=0 lists nothing and is not truncated", "[gateway][semantics]") {
  const auto fetch = [](const ListCursor&, size_t) {
    ObjectRecord o;
    o.key = "a";
    return std::vector<ObjectRecord>{o};
  };
  const ListingPage page = list_page(fetch, "", "", {}, 0);
  CHECK(page.objects.empty());
  CHECK_FALSE(page.truncated);
}

TEST_CASE("listing: encoding-type=url encodes as S3 (blank %20, '/' and '*' kept, '~' escaped)", "[gateway][semantics]") {
  CHECK(listing_url_encode("quux ab/thud") == "quux%20ab/thud");
  CHECK(listing_url_encode("foo+1/") == "foo%2B1/");
  CHECK(listing_url_encode("a*b~c") == "a*b%7Ec");
  CHECK(listing_url_encode("-_.") == "-_.");
  CHECK(listing_url_encode("%&=?#|") == "%25%26%3D%3F%23%7C");
  CHECK(listing_url_encode("\xc3\xa9\x01") == "%C3%A9%01");
}

TEST_CASE("user metadata: RFC 2047 encoded-words decoded on the way in, non-ASCII encoded on the way out",
          "[gateway][semantics]") {
  // B and Q, any case of charset and encoding; Q's '_' is a blank.
  CHECK(decode_metadata_value("=?UTF-8?B?SMOpbGxv?=") == "H\xc3\xa9llo");
  CHECK(decode_metadata_value("=?utf-8?q?caf=C3=A9_au_lait?=") == "caf\xc3\xa9 au lait");
  CHECK(decode_metadata_value("=?ISO-8859-1?Q?caf=E9?=") == "caf\xc3\xa9");
  CHECK(decode_metadata_value("=?UTF-8?B?SGVsbG8=?=") == "Hello");
  // Blanks between adjacent encoded-words are not text; around plain words they are.
  CHECK(decode_metadata_value("=?UTF-8?B?SMOp?= =?UTF-8?B?bGxv?=") == "H\xc3\xa9llo");
  CHECK(decode_metadata_value("a =?UTF-8?Q?=C3=A9?= b") == "a \xc3\xa9 b");
  CHECK(decode_metadata_value(" lead  trail ") == " lead  trail ");
  // Not encoded-words (malformed, unknown charset, bad base64 or UTF-8): kept as sent.
  for (const char* kept : {"=?UTF-8?B?not base64?=", "=?UTF-8?X?abc?=", "=?KOI8-R?B?SGVsbG8=?=", "=?UTF-8?Q?=ZZ?=",
                           "=?UTF-8?B?/w==?=", "=?" "?B?SGVsbG8=?="  /* no charset */, "=?UTF-8?B?" "?=", "plain", "x%20y", ""}) {
    CHECK(decode_metadata_value(kept) == kept);
  }
  // Raw bytes: UTF-8 stays, anything else is ISO-8859-1 (HTTP's header charset).
  CHECK(decode_metadata_value("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(decode_metadata_value("caf\xe9") == "caf\xc3\xa9");

  // Out as S3 (MimeUtility) sends it: printable ASCII and tabs as they are, Q when most
  // characters (UTF-16 units) are printable ASCII, B otherwise.
  CHECK(encode_metadata_value("plain value") == "plain value");
  CHECK(encode_metadata_value("a\tb") == "a\tb");
  CHECK(encode_metadata_value("\x04mymeta") == "=?UTF-8?Q?=04mymeta?=");
  CHECK(encode_metadata_value("H\xc3\xa9llo") == "=?UTF-8?Q?H=C3=A9llo?=");
  CHECK(encode_metadata_value("= _?\t\x7f\xc3\xa9 ok") == "=?UTF-8?Q?=3D_=5F=3F=09=7F=C3=A9_ok?=");
  CHECK(encode_metadata_value("\xc3\xa9\xc3\xa9" "a") == "=?UTF-8?B?w6nDqWE=?=");
  CHECK(encode_metadata_value("\xc3\xa9" "ab") == "=?UTF-8?Q?=C3=A9ab?=");
  // An emoji is two UTF-16 units: no longer mostly text.
  CHECK(encode_metadata_value("\xf0\x9f\x98\x80" "ab") == "=?UTF-8?B?8J+YgGFi?=");
  // Round trip: what goes out decodes to what was stored.
  for (const char* value : {"H\xc3\xa9llo", "\xe6\x97\xa5\xe6\x9c\xac", "a b", "=?UTF-8?B?SGVsbG8=?=", "\x04mymeta",
                            "= _?\xc3\xa9 ok", "\xf0\x9f\x98\x80" "ab"}) {
    const std::string stored = decode_metadata_value(value);
    CHECK(decode_metadata_value(encode_metadata_value(stored)) == stored);
  }
}

TEST_CASE("tagging: the document lists tags by key, whatever order they were given in", "[gateway][semantics]") {
  const std::string doc = tagging_document({{"foo", "bar"}, {"bar", ""}, {"Zed", "1"}, {"\xc3\xa9", "2"}});
  const size_t zed = doc.find("<Key>Zed</Key>"), bar = doc.find("<Key>bar</Key>"), foo = doc.find("<Key>foo</Key>"),
               e = doc.find("<Key>\xc3\xa9</Key>");
  REQUIRE(e != std::string::npos);
  CHECK(zed < bar);
  CHECK(bar < foo);
  CHECK(foo < e);
}
