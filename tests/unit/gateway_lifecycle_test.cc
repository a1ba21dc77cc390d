// Bucket lifecycle configurations: S3's validation and error codes, the
// document shown back, and what the rules decide about versions and uploads
// (tests/gateway/test_lifecycle.py runs the sweep against a live gateway).
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "gateway/lifecycle.h"
#include "gateway/s3_api.h"
#include "gateway/s3_error.h"
#include "tests/unit/s3_error_code.h"
#include "tests/unit/temp_dir.h"

using namespace keel::gateway;
using keel::test::error_code;

namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kDay = 86'400 * kSecond;
constexpr int64_t kMidnight = 19'675 * kDay;  // Tue, 14 Nov 2023 00:00:00 GMT

std::string config(const std::string& rules) {
  return "<LifecycleConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" + rules +
         "</LifecycleConfiguration>";
}

std::string rule(const std::string& body, const std::string& id = "r1", const std::string& status = "Enabled") {
  return "<Rule><ID>" + id + "</ID><Status>" + status + "</Status>" + body + "</Rule>";
}

std::string refusal(const std::string& xml) {
  return error_code([&] { LifecycleConfiguration::parse(xml); });
}

ObjectRecord version(const std::string& key, int64_t modified_ns, uint64_t size = 10, NameValues tags = {}) {
  ObjectRecord o;
  o.key = key;
  o.modified_ns = modified_ns;
  o.size = size;
  o.tags = std::move(tags);
  return o;
}

}  // namespace

TEST_CASE("lifecycle: S3's validation and error codes", "[gateway][lifecycle]") {
  const std::string days = "<Expiration><Days>1</Days></Expiration>";
  CHECK(refusal(config(rule("<Filter/>" + days, std::string(256, 'x')))) == "InvalidArgument");
  CHECK_NOTHROW(LifecycleConfiguration::parse(config(rule("<Filter/>" + days, std::string(255, 'x')))));
  CHECK(refusal(config(rule("<Prefix>a</Prefix>" + days) + rule("<Prefix>b</Prefix>" + days))) == "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix/>" + days, "r1", "enabled"))) == "MalformedXML");
  CHECK(refusal(config(rule("<Prefix/>" + days, "r1", "invalid"))) == "MalformedXML");
  CHECK(refusal(config(rule("<Prefix/><Expiration><Days>0</Days></Expiration>"))) == "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix/><Expiration><Days>-3</Days></Expiration>"))) == "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix/><Expiration><Days>x</Days></Expiration>"))) == "MalformedXML");
  CHECK(refusal(config(rule("<Prefix/><Expiration><Date>2030-01-01T10:00:00Z</Date></Expiration>"))) ==
        "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix/><Expiration><Date>20300101</Date></Expiration>"))) == "MalformedXML");
  CHECK(refusal(config(rule("<Prefix/><Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z</Date></Expiration>"))) ==
        "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix/>"))) == "InvalidArgument");  // no action
  CHECK(refusal(config(rule("<Prefix/><Expiration><ExpiredObjectDeleteMarker>false</ExpiredObjectDeleteMarker>"
                            "</Expiration>"))) == "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix>a</Prefix><Filter><Prefix>a</Prefix></Filter>" + days))) == "InvalidArgument");
  CHECK(refusal(config(rule(days))) == "MalformedXML");  // neither Prefix nor Filter
  CHECK(refusal(config(rule("<Filter><And><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter>" + days))) ==
        "MalformedXML");  // one condition goes without <And>
  CHECK(refusal(config(rule("<Filter><And/></Filter>" + days))) == "MalformedXML");
  CHECK(refusal(config(rule("<Filter><And><Prefix>a</Prefix><Prefix>b</Prefix></And><And><Prefix>c</Prefix>"
                            "<Prefix>d</Prefix></And></Filter>" + days))) == "MalformedXML");
  CHECK(refusal(config(rule("<Filter><Prefix>a/</Prefix><And><Prefix>b/</Prefix><Tag><Key>k</Key><Value>v</Value>"
                            "</Tag></And></Filter>" + days))) == "InvalidArgument");  // no key starts with both
  CHECK(refusal(config(rule("<Filter><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan></Filter>"
                            "<AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation>"
                            "</AbortIncompleteMultipartUpload>"))) == "InvalidRequest");
  CHECK(refusal(config(rule("<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>"
                            "<Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>"))) ==
        "InvalidRequest");
  CHECK(refusal(config(rule("<Filter><And><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan>"
                            "<ObjectSizeLessThan>10</ObjectSizeLessThan></And></Filter>" + days))) == "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix/><Expiration><Days>1</Days><ExpiredObjectDeleteMarker>true"
                            "</ExpiredObjectDeleteMarker></Expiration>"))) == "MalformedXML");
  CHECK(refusal(config(rule("<Prefix/><NoncurrentVersionExpiration><NoncurrentDays>0</NoncurrentDays>"
                            "</NoncurrentVersionExpiration>"))) == "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix/><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays>"
                            "<NewerNoncurrentVersions>101</NewerNoncurrentVersions></NoncurrentVersionExpiration>"))) ==
        "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix/><AbortIncompleteMultipartUpload><DaysAfterInitiation>0</DaysAfterInitiation>"
                            "</AbortIncompleteMultipartUpload>"))) == "InvalidArgument");
  CHECK(refusal(config(rule("<Prefix/><Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition>"))) ==
        "InvalidStorageClass");
  CHECK(refusal(config(rule("<Prefix/>" + days + "<Bogus/>"))) == "MalformedXML");
  CHECK(refusal(config("")) == "MalformedXML");
  CHECK(refusal("<CORSConfiguration/>") == "MalformedXML");
}

TEST_CASE("lifecycle: the document shown back, IDs generated where missing", "[gateway][lifecycle]") {
  const auto parsed = LifecycleConfiguration::parse(config(
      "<Rule><Status>Enabled</Status><Prefix>logs/</Prefix><Expiration><Days>3</Days></Expiration></Rule>" +
      rule("<Filter><And><Prefix>a/</Prefix><Tag><Key> k </Key><Value>v </Value></Tag>"
           "<ObjectSizeGreaterThan>5</ObjectSizeGreaterThan></And></Filter>"
           "<Expiration><Date>2030-01-01T00:00:00.000Z</Date></Expiration>"
           "<NoncurrentVersionExpiration><NoncurrentDays>2</NoncurrentDays><NewerNoncurrentVersions>3"
           "</NewerNoncurrentVersions></NoncurrentVersionExpiration>",
           "dated", "Disabled") +
      rule("<Filter><Prefix></Prefix></Filter><AbortIncompleteMultipartUpload><DaysAfterInitiation>7"
           "</DaysAfterInitiation></AbortIncompleteMultipartUpload>",
           "uploads")));
  REQUIRE(parsed.rules().size() == 3);
  const std::string generated = parsed.rules()[0].id;
  CHECK(generated.size() == 48);
  CHECK(parsed.rules()[1].id == "dated");  // IDs sent are kept
  CHECK(parsed.rules()[2].id == "uploads");
  CHECK(parsed.rules()[1].filter.tags == NameValues{{" k ", "v "}});
  const std::string xml = parsed.to_xml();
  CHECK(xml.find("<ID>" + generated + "</ID><Prefix>logs/</Prefix><Status>Enabled</Status>") != std::string::npos);
  CHECK(xml.find("<Filter><And><Prefix>a/</Prefix><Tag><Key> k </Key><Value>v </Value></Tag>"
                 "<ObjectSizeGreaterThan>5</ObjectSizeGreaterThan></And></Filter><Status>Disabled</Status>") !=
        std::string::npos);
  CHECK(xml.find("<NewerNoncurrentVersions>3</NewerNoncurrentVersions>") != std::string::npos);
  CHECK(xml.find("<Filter><Prefix></Prefix></Filter>") != std::string::npos);
  // What GetBucketLifecycle shows parses to the same document (the generated ID kept).
  CHECK(LifecycleConfiguration::parse(xml).to_xml() == xml);
  // The prefixes a sweep lists: enabled rules only, split by what they act on.
  CHECK(parsed.prefixes(false) == std::vector<std::string>{"logs/"});
  CHECK(parsed.prefixes(true) == std::vector<std::string>{""});
}

TEST_CASE("lifecycle: several conditions beside or without <And> are their conjunction", "[gateway][lifecycle]") {
  // The forms the ceph s3-tests tag cases send (RGW reads them so; AWS refuses them).
  const auto parsed = LifecycleConfiguration::parse(config(
      rule("<Filter><Prefix>days1/</Prefix><Tag><Key>tom</Key><Value>sawyer</Value></Tag></Filter>"
           "<Expiration><Days>1</Days></Expiration>",
           "two") +
      rule("<Filter><Prefix>days1/</Prefix><Tag><Key>tom</Key><Value>sawyer</Value></Tag><And><Prefix>days1"
           "</Prefix><Tag><Key>huck</Key><Value>finn</Value></Tag></And></Filter><Expiration><Days>2</Days>"
           "</Expiration>",
           "beside")));
  const auto& two = parsed.rules()[0].filter;
  CHECK(two.prefix == "days1/");
  CHECK(two.tags == NameValues{{"tom", "sawyer"}});
  const auto& beside = parsed.rules()[1].filter;
  CHECK(beside.prefix == "days1/");  // the narrower of the two prefixes
  CHECK(beside.tags == NameValues{{"huck", "finn"}, {"tom", "sawyer"}});
  CHECK_FALSE(beside.matches("days1/tom", {{"tom", "sawyer"}}, 1));
  CHECK(beside.matches("days1/huck", {{"tom", "sawyer"}, {"huck", "finn"}}, 1));
  CHECK_FALSE(beside.matches("days1x", {{"tom", "sawyer"}, {"huck", "finn"}}, 1));
  // Shown back in AWS's form, which parses to the same rules.
  const std::string xml = parsed.to_xml();
  CHECK(xml.find("<Filter><And><Prefix>days1/</Prefix><Tag><Key>tom</Key><Value>sawyer</Value></Tag></And></Filter>") !=
        std::string::npos);
  CHECK(LifecycleConfiguration::parse(xml).to_xml() == xml);
}

TEST_CASE("lifecycle: expiry dates, filters and prefixes", "[gateway][lifecycle]") {
  const auto parsed = LifecycleConfiguration::parse(config(
      rule("<Prefix>tmp/</Prefix><Expiration><Days>1</Days></Expiration>", "short") +
      rule("<Filter><And><Prefix>tmp/</Prefix><Tag><Key>keep</Key><Value>no</Value></Tag></And></Filter>"
           "<Expiration><Date>2023-11-14T00:00:00Z</Date></Expiration>",
           "tagged") +
      rule("<Filter><ObjectSizeLessThan>100</ObjectSizeLessThan></Filter><Expiration><Days>30</Days></Expiration>",
           "small") +
      rule("<Prefix>tmp/a</Prefix><AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation>"
           "</AbortIncompleteMultipartUpload>",
           "abort")));
  const LifecycleDay real;
  // Written at 10:00 on 13 Nov: one day later, rounded up to the next midnight UTC.
  const int64_t written = kMidnight - kDay + 10 * 3600 * kSecond;
  auto due = parsed.expiration(version("tmp/x", written), real);
  REQUIRE(due);
  CHECK(due->at_ns == kMidnight + kDay);
  CHECK(due->rule_id == "short");
  CHECK(expiration_header(*due) == "expiry-date=\"Wed, 15 Nov 2023 00:00:00 GMT\", rule-id=\"short\"");
  // The tag filter matches only with the tag; its date is earlier.
  due = parsed.expiration(version("tmp/x", written, 10, {{"keep", "no"}, {"other", "1"}}), real);
  REQUIRE(due);
  CHECK(due->rule_id == "tagged");
  CHECK(due->at_ns == kMidnight);
  // Size: under 100 bytes expires after 30 days; 100 bytes is not under.
  CHECK(parsed.expiration(version("big", written, 100), real) == std::nullopt);
  CHECK(parsed.expiration(version("small", written, 99), real)->rule_id == "small");
  ObjectRecord marker = version("tmp/x", written);
  marker.delete_marker = true;
  CHECK(parsed.expiration(marker, real) == std::nullopt);
  // A debug day is not rounded.
  const LifecycleDay debug{10 * kSecond};
  CHECK(parsed.expiration(version("tmp/x", written), debug)->at_ns == written + 10 * kSecond);
  // Uploads: by prefix only.
  CHECK(parsed.abort_date("tmp/ab", written, real)->at_ns == kMidnight + 2 * kDay);
  CHECK(parsed.abort_date("tmp/b", written, real) == std::nullopt);
  // Prefixes inside others are swept with them; "" (the size rule) covers the bucket.
  CHECK(parsed.prefixes(false) == std::vector<std::string>{""});
  CHECK(parsed.prefixes(true) == std::vector<std::string>{"tmp/a"});
}

TEST_CASE("lifecycle: what the rules do to current, noncurrent and delete-marker versions", "[gateway][lifecycle]") {
  const auto parsed = LifecycleConfiguration::parse(config(
      rule("<Prefix>cur/</Prefix><Expiration><Days>1</Days></Expiration>", "cur") +
      rule("<Prefix>old/</Prefix><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays>"
           "<NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration>",
           "old") +
      rule("<Prefix>dm/</Prefix><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>",
           "dm") +
      rule("<Prefix>off/</Prefix><Expiration><Days>1</Days></Expiration>", "off", "Disabled")));
  const LifecycleDay day{10 * kSecond};
  const int64_t t = kMidnight;
  const VersionPlace current{true, true, 0, 0};
  CHECK(lifecycle_action(parsed, version("cur/a", t), current, day, t + 9 * kSecond) == LifecycleAction::kNone);
  CHECK(lifecycle_action(parsed, version("cur/a", t), current, day, t + 10 * kSecond) ==
        LifecycleAction::kExpireCurrent);
  CHECK(lifecycle_action(parsed, version("off/a", t), current, day, t + kDay) == LifecycleAction::kNone);
  CHECK(lifecycle_action(parsed, version("other", t), current, day, t + kDay) == LifecycleAction::kNone);
  // Noncurrent: counted from when the next newer version was written; the two newest noncurrent ones stay.
  const int64_t superseded = t + 100 * kSecond;
  CHECK(lifecycle_action(parsed, version("old/a", t), {false, false, superseded, 2}, day, superseded + 9 * kSecond) ==
        LifecycleAction::kNone);
  CHECK(lifecycle_action(parsed, version("old/a", t), {false, false, superseded, 2}, day, superseded + 10 * kSecond) ==
        LifecycleAction::kRemoveNoncurrent);
  CHECK(lifecycle_action(parsed, version("old/a", t), {false, false, superseded, 1}, day, superseded + kDay) ==
        LifecycleAction::kNone);
  // The current version under a noncurrent-only rule stays.
  CHECK(lifecycle_action(parsed, version("old/a", t), current, day, t + kDay) == LifecycleAction::kNone);
  // A delete marker with no other version goes; one with versions behind it stays.
  ObjectRecord marker = version("dm/a", t, 0);
  marker.delete_marker = true;
  CHECK(lifecycle_action(parsed, marker, current, day, t) == LifecycleAction::kRemoveDeleteMarker);
  CHECK(lifecycle_action(parsed, marker, {true, false, 0, 0}, day, t) == LifecycleAction::kNone);
  // A Days rule removes such a marker too, once it is as old as the rule asks.
  ObjectRecord expiring_marker = version("cur/a", t, 0);
  expiring_marker.delete_marker = true;
  CHECK(lifecycle_action(parsed, expiring_marker, current, day, t + 9 * kSecond) == LifecycleAction::kNone);
  CHECK(lifecycle_action(parsed, expiring_marker, current, day, t + 10 * kSecond) ==
        LifecycleAction::kRemoveDeleteMarker);
  CHECK(lifecycle_action(parsed, expiring_marker, {true, false, 0, 0}, day, t + kDay) == LifecycleAction::kNone);
}

TEST_CASE("lifecycle sweep: lists only the rules' prefixes, bounded per run, and goes on where it stopped",
          "[gateway][lifecycle]") {
  keel::test::TempDir dir("keel-lifecycle");
  GatewayConfig gateway;
  gateway.state_dir = dir.file("state");
  gateway.bucket_root = dir.file("buckets");
  gateway.users = {User{"alice", "AKIDALICE", "secret"}};
  const int64_t written = kMidnight;
  {
    // Written straight into gateway.db: 2000 objects beside a rule's 10 in bucket "p", 1200 in "w".
    std::filesystem::create_directories(gateway.state_dir);
    MetadataStore metadata(gateway.state_dir + "/gateway.db");
    metadata.transaction([&] {
      for (const std::string name : {"p", "w"}) {
        std::filesystem::create_directories(gateway.bucket_root + "/" + name);
        metadata.put_bucket({name, "alice", 1, gateway.bucket_root + "/" + name, false});
      }
      metadata.set_lifecycle("p", LifecycleConfiguration::parse(config(
                                      rule("<Prefix>in/</Prefix><Expiration><Days>1</Days></Expiration>"))).to_xml());
      metadata.set_lifecycle("w", LifecycleConfiguration::parse(config(
                                      rule("<Filter/><Expiration><Days>1000</Days></Expiration>"))).to_xml());
      const auto put = [&](const std::string& bucket, const std::string& key) {
        ObjectRecord o = version(key, written);
        o.bucket = bucket;
        o.etag = "e";
        metadata.put_object(o);
      };
      for (int i = 0; i < 2000; ++i) put("p", (i % 2 ? "a/" : "z/") + std::to_string(i));
      for (int i = 0; i < 10; ++i) put("p", "in/" + std::to_string(i));
      for (int i = 0; i < 1200; ++i) put("w", std::to_string(i));
    });
  }
  S3Api api(gateway);
  // Not yet due: nothing happens, and only the 10 versions under in/ and the 1200 of "w" are looked at.
  auto sweep = api.sweep_lifecycle(written + kDay / 2, 100'000);
  CHECK(sweep.examined == 1210);
  CHECK(sweep.expired == 0);
  CHECK(sweep.finished);
  // Due in "p" (a day rounds up to the next midnight): at most 500 a run, the next run going on.
  const int64_t due = written + 2 * kDay;
  uint64_t examined = 0, expired = 0;
  int runs = 0;
  do {
    sweep = api.sweep_lifecycle(due, 500);
    CHECK(sweep.examined <= 500);
    examined += sweep.examined;
    expired += sweep.expired;
    ++runs;
  } while (!sweep.finished && runs < 10);
  CHECK(sweep.finished);
  CHECK(runs == 3);
  CHECK(examined == 1210);
  CHECK(expired == 10);
  // Gone: the next pass starts over and finds only "w"'s.
  CHECK(api.sweep_lifecycle(due, 100'000).examined == 1200);
}

// Not in CI (hidden tag): the CPU a sweep run costs, for docs/gateway.md ("Lifecycle").
// build/tests/keel_unit_tests "[.lifecycle-bench]"
TEST_CASE("lifecycle sweep: time of a 100,000-version run with nothing due", "[.lifecycle-bench]") {
  keel::test::TempDir dir("keel-lifecycle-bench");
  GatewayConfig gateway;
  gateway.state_dir = dir.file("state");
  gateway.bucket_root = dir.file("buckets");
  gateway.users = {User{"alice", "AKIDALICE", "secret"}};
  {
    std::filesystem::create_directories(gateway.state_dir);
    std::filesystem::create_directories(gateway.bucket_root + "/b");
    MetadataStore metadata(gateway.state_dir + "/gateway.db");
    metadata.transaction([&] {
      metadata.put_bucket({"b", "alice", 1, gateway.bucket_root + "/b", false});
      metadata.set_lifecycle("b", LifecycleConfiguration::parse(config(
                                      rule("<Filter/><Expiration><Days>1000</Days></Expiration>"))).to_xml());
      for (int i = 0; i < 100'000; ++i) {
        ObjectRecord o = version("backups/job-" + std::to_string(i % 97) + "/" + std::to_string(i), kMidnight);
        o.bucket = "b";
        o.etag = "e";
        metadata.put_object(o);
      }
    });
  }
  S3Api api(gateway);
  const auto cpu = [] { return std::clock() / double(CLOCKS_PER_SEC); };
  const double start = cpu();
  const auto wall = std::chrono::steady_clock::now();
  const auto sweep = api.sweep_lifecycle(kMidnight + kDay, 100'000);
  std::cout << "lifecycle sweep: " << sweep.examined << " versions, " << (cpu() - start) << " s CPU, "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count() << " s wall\n";
  CHECK(sweep.examined == 100'000);
}
