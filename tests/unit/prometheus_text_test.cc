#include <catch2/catch.hpp>

#include <limits>

#include "util/prometheus_text.h"

using keel::PrometheusText;

TEST_CASE("Prometheus text: families, samples, escaped labels and numbers", "[prometheus]") {
  PrometheusText out;
  out.family("keel_x_total", "counter", "Things counted.");
  out.sample("keel_x_total", PrometheusText::label("name", "a \"b\"\\c\nd"), uint64_t{18446744073709551615u});
  out.sample("keel_x_total", "", 0.25);
  CHECK(out.take() ==
        "# HELP keel_x_total Things counted.\n# TYPE keel_x_total counter\n"
        "keel_x_total{name=\"a \\\"b\\\"\\\\c\\nd\"} 18446744073709551615\n"
        "keel_x_total 0.25\n");
  CHECK(PrometheusText::number(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(PrometheusText::number(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(PrometheusText::number(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  CHECK(PrometheusText::number(1e-3) == "0.001");
  CHECK(PrometheusText::number(86400) == "86400");
}
