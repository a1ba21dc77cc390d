// How a restore drill is shown: the terminal summary, the JSON and HTML
// reports of `keel drill`, the record kept in the catalog, and the history
// table of `keel drills`.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "catalog/catalog.h"
#include "engine/drill.h"

namespace keel::cli {

// "objectives met", "objectives missed: RTO and RPO".
std::string drill_outcome(const engine::DrillReport& r);
// Label and value of each summary line, shared by the terminal and the HTML report.
std::vector<std::pair<std::string, std::string>> drill_summary_rows(const engine::DrillReport& r);
// The whole report as one JSON object, every failure included.
std::string drill_report_json(const engine::DrillReport& r);
// A self-contained HTML page: summary, throughput plot, the first failures.
std::string drill_report_html(const engine::DrillReport& r);
// What the catalog keeps of a drill; `json` is drill_report_json's text.
catalog::DrillRecord drill_record(const engine::DrillReport& r, std::string json);
// `keel drills` on stdout: a JSON array when `json`, else a table and its count.
void print_drill_history(const std::vector<catalog::DrillRecord>& drills, bool json);

}  // namespace keel::cli
