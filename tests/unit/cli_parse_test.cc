#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "cli/parse.h"
#include "util/error.h"

using namespace keel;
using keel::cli::parse_duration;
using keel::cli::parse_fraction;
using keel::cli::parse_count;
using keel::cli::parse_size;
using std::chrono::seconds;

namespace {

// The usage error's message, or "" if `fn` did not throw one.
template <typename Fn>
std::string usage_error(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.kind() == ErrorKind::kUsage ? e.what() : "wrong kind: " + std::string(e.what());
  }
  return "";
}

}  // namespace

TEST_CASE("parse_duration reads s, m, h and d, alone and combined", "[cli][parse]") {
  CHECK(parse_duration("0s", "--rto") == seconds(0));
  CHECK(parse_duration("90s", "--rto") == seconds(90));
  CHECK(parse_duration("30m", "--rto") == seconds(1800));
  CHECK(parse_duration("1h30m", "--rto") == seconds(5400));
  CHECK(parse_duration("2d", "--rto") == seconds(2 * 86400));
  CHECK(parse_duration("1d2h3m4s", "--rto") == seconds(86400 + 7200 + 180 + 4));
  CHECK(parse_duration("120m", "--rto") == seconds(7200));  // no carrying rules: any count per unit
  CHECK(parse_duration("0", "--grace") == seconds(0));       // zero needs no unit
}

TEST_CASE("parse_duration rejects what it cannot read, naming the option and value", "[cli][parse]") {
  for (const char* bad : {"", "30", "1h30", "m", "1x", "1.5h", "-5m", "+5m", "30m1h", "1h1h", " 1h", "1h ", "1H"}) {
    INFO(bad);
    std::string message = usage_error([&] { parse_duration(bad, "--rto"); });
    CHECK_THAT(message, Catch::Contains("--rto") && Catch::Contains(std::string("'") + bad + "'"));
  }
  CHECK_THAT(usage_error([] { parse_duration("30", "--rpo"); }), Catch::Contains("unit"));
  CHECK_THAT(usage_error([] { parse_duration("99999999999999999999s", "--rpo"); }), Catch::Contains("too long"));
  CHECK_THAT(usage_error([] { parse_duration("9999999999999999d", "--rpo"); }), Catch::Contains("too long"));
}

TEST_CASE("parse_fraction reads percentages and fractions in (0, 1]", "[cli][parse]") {
  CHECK(parse_fraction("10%", "--sample") == Approx(0.1));
  CHECK(parse_fraction("0.1", "--sample") == Approx(0.1));
  CHECK(parse_fraction("100%", "--sample") == 1.0);
  CHECK(parse_fraction("1", "--sample") == 1.0);
  CHECK(parse_fraction("0.5%", "--sample") == Approx(0.005));
  CHECK(parse_fraction("50%", "--sample") == parse_fraction("0.5", "--sample"));
}

TEST_CASE("parse_fraction rejects values outside (0, 1] and junk", "[cli][parse]") {
  for (const char* bad : {"", "%", "0", "0%", "-10%", "150%", "2", "abc", "10 %", "10%%", "nan", "inf", "0.1x"}) {
    INFO(bad);
    CHECK_THAT(usage_error([&] { parse_fraction(bad, "--sample"); }),
               Catch::Contains("--sample") && Catch::Contains(std::string("'") + bad + "'"));
  }
  CHECK_THAT(usage_error([] { parse_fraction("50", "--sample"); }), Catch::Contains("did you mean 50%?"));
}

TEST_CASE("parse_fraction allows 0 where asked to", "[cli][parse]") {
  CHECK(parse_fraction("0", "--repack-threshold", true) == 0.0);
  CHECK(parse_fraction("0%", "--repack-threshold", true) == 0.0);
  CHECK(parse_fraction("50%", "--repack-threshold", true) == Approx(0.5));
  for (const char* bad : {"-1%", "101%", "x", ""}) {
    INFO(bad);
    CHECK_THAT(usage_error([&] { parse_fraction(bad, "--repack-threshold", true); }),
               Catch::Contains("--repack-threshold") && Catch::Contains("from 0 to 1"));
  }
}

TEST_CASE("parse_size reads bytes and binary units", "[cli][parse]") {
  CHECK(parse_size("0", "--max-repack") == 0);
  CHECK(parse_size("4096", "--max-repack") == 4096);
  CHECK(parse_size("1K", "--max-repack") == 1024);
  CHECK(parse_size("500M", "--max-repack") == 500ull << 20);
  CHECK(parse_size("10GiB", "--max-repack") == 10ull << 30);
  CHECK(parse_size("2GB", "--max-repack") == 2ull << 30);
  CHECK(parse_size("1T", "--max-repack") == 1ull << 40);
  for (const char* bad : {"", "G", "1.5G", "-1G", "10X", "10Gi", "10 G", "10g", "99999999999999999999", "20000000T"}) {
    INFO(bad);
    CHECK_THAT(usage_error([&] { parse_size(bad, "--max-repack"); }),
               Catch::Contains("--max-repack") && Catch::Contains(std::string("'") + bad + "'"));
  }
}

TEST_CASE("parse_duration refuses more than 100 years, so no clock overflows", "[cli][parse]") {
  CHECK(parse_duration("36600d", "--grace") == keel::cli::kLongestDuration);
  CHECK_THAT(usage_error([] { parse_duration("36601d", "--grace"); }), Catch::Contains("at most 100 years"));
  CHECK_THAT(usage_error([] { parse_duration("106751991167d", "--grace"); }), Catch::Contains("at most 100 years"));
}

TEST_CASE("parse_count takes whole numbers in range and nothing that could wrap", "[cli][parse]") {
  CHECK(parse_count("0", "--readers", 0, 1024) == 0);
  CHECK(parse_count("1024", "--readers", 0, 1024) == 1024);
  CHECK(parse_count("18446744073709551615", "--seed", 0, UINT64_MAX) == UINT64_MAX);
  CHECK(usage_error([] { parse_count("-1", "--keep-last", 0, 100); }) ==
        "--keep-last '-1': give a whole number from 0 to 100");
  CHECK(usage_error([] { parse_count("17592186044416", "--pack-size", 1, 4096, "MiB"); }) ==
        "--pack-size '17592186044416': too large: give a whole number from 1 to 4096 (MiB)");
  CHECK(usage_error([] { parse_count("0", "--pack-size", 1, 4096, "MiB"); }) ==
        "--pack-size '0': too small: give a whole number from 1 to 4096 (MiB)");
  for (const char* bad : {"", " 1", "1 ", "+1", "1e3", "0x10", "5x", "1.5", "99999999999999999999999"}) {
    INFO(bad);
    CHECK_THAT(usage_error([&] { parse_count(bad, "--readers", 0, 1024); }),
               Catch::StartsWith(std::string("--readers '") + bad + "'"));
  }
}
