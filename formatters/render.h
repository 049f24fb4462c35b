// Rendering of report objects. Formatters know report types and output formats, nothing else: no
// image, no session.
#pragma once

#include <stdexcept>
#include <string>

#include "reports/report.h"

namespace heapscope {

// text for people at a prompt, json for scripts (docs/json.md), html for one self-contained page to open
// in a browser, dot for Graphviz, svg for a chart. Every report has text and JSON; the others exist where a
// report has a render_html, render_dot or render_svg overload.
enum class OutputFormat { text, json, html, dot, svg };
inline constexpr OutputFormat kOutputFormats[] = {OutputFormat::text, OutputFormat::json, OutputFormat::html,
                                                  OutputFormat::dot, OutputFormat::svg};
const char* format_name(OutputFormat format);

// Thrown by render() when a report has no renderer for the format asked for.
class UnsupportedFormat : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

std::string render(const Report& report, OutputFormat format);

// One renderer per report type and format (formatters/text/*.cpp, formatters/json/*.cpp).
std::string render_text(const SummaryReport& r);
std::string render_text(const BlocksReport& r);
std::string render_json(const SummaryReport& r);
std::string render_json(const BlocksReport& r);
std::string render_text(const LeaksReport& r);
std::string render_json(const LeaksReport& r);
std::string render_text(const RetainersReport& r);
std::string render_json(const RetainersReport& r);
std::string render_text(const RefsReport& r);
std::string render_json(const RefsReport& r);
std::string render_text(const DescribeReport& r);
std::string render_json(const DescribeReport& r);
std::string render_text(const HistogramReport& r);
std::string render_json(const HistogramReport& r);
std::string render_text(const TopReport& r);
std::string render_json(const TopReport& r);
std::string render_text(const RootsReport& r);
std::string render_json(const RootsReport& r);
std::string render_text(const ThreadsReport& r);
std::string render_json(const ThreadsReport& r);
std::string render_text(const CoroutinesReport& r);
std::string render_json(const CoroutinesReport& r);
std::string render_text(const ChainsReport& r);
std::string render_json(const ChainsReport& r);
std::string render_text(const FinalizersReport& r);
std::string render_json(const FinalizersReport& r);
std::string render_text(const VerifyReport& r);
std::string render_json(const VerifyReport& r);
std::string render_text(const ReportBundle& r);
std::string render_json(const ReportBundle& r);

// HTML pages (formatters/html/, built with html_page.h) and Graphviz graphs (formatters/dot/).
std::string render_html(const SummaryReport& r);
std::string render_html(const LeaksReport& r);
std::string render_html(const TopReport& r);
std::string render_html(const RootsReport& r);
std::string render_html(const RetainersReport& r);
std::string render_html(const ReportBundle& r);
std::string render_dot(const RetainersReport& r);
std::string render_text(const FragmentationReport& r);
std::string render_json(const FragmentationReport& r);
std::string render_text(const SnapshotReport& r);
std::string render_json(const SnapshotReport& r);
std::string render_text(const DiffReport& r);
std::string render_json(const DiffReport& r);
std::string render_text(const EvolutionReport& r);
std::string render_json(const EvolutionReport& r);
// A line chart of bytes per type over the points (formatters/svg/evolution_svg.cpp).
std::string render_svg(const EvolutionReport& r);
std::string render_html(const FragmentationReport& r);
std::string render_html(const DiffReport& r);
std::string render_html(const EvolutionReport& r);

}  // namespace heapscope
