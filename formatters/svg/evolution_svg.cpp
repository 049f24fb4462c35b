// The evolution report as a line chart: bytes per type at each point, steady growers drawn heavier.
#include <cmath>

#include "formatters/render.h"
#include "formatters/svg/line_chart.h"
#include "formatters/text/snapshot_time.h"
#include "formatters/text/text_util.h"

namespace heapscope {

std::string render_svg(const EvolutionReport& r) {
  svg::LineChart chart;
  chart.title = fmt::format("Bytes per type over {} point{}", r.points.size(), r.points.size() == 1 ? "" : "s");
  for (const SnapshotInfo& p : r.points) {
    chart.point_labels.push_back(p.name);
    chart.point_sublabels.push_back(text::capture_time(p.capture_time_ns));
  }
  for (const EvolutionSeries& s : r.series) {
    svg::ChartSeries series{s.type, {}, s.steady};
    for (std::uint64_t b : s.bytes) series.values.push_back(static_cast<double>(b));
    chart.series.push_back(std::move(series));
  }
  chart.value_label = [](double v) { return text::bytes(static_cast<std::uint64_t>(std::llround(v))); };
  chart.binary_units = true;
  chart.highlight_legend = " (grows at every step)";
  return svg::render_line_chart(chart);
}

}  // namespace heapscope
