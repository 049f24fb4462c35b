// A self-contained SVG line chart: named series of values over labelled points, with axes, a legend and
// highlighted series drawn heavier. Used for `evolution` charts; the HTML report embeds the same SVG.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace heapscope::svg {

struct ChartSeries {
  std::string name;
  std::vector<double> values;  // one per point
  bool highlighted = false;    // drawn heavier and marked in the legend
};

struct LineChart {
  std::string title;
  std::vector<std::string> point_labels;          // under the x axis, one per point
  std::vector<std::string> point_sublabels;       // a second, smaller line under each (may be empty)
  std::vector<ChartSeries> series;
  std::function<std::string(double)> value_label;  // y axis labels (default: the number)
  std::string highlight_legend;                   // appended to highlighted series' legend entries
  bool binary_units = false;  // values are bytes: y ticks fall on round numbers of KiB, MiB, GiB
};

// The whole <svg> document, with an XML declaration; no scripts, no external resources.
std::string render_line_chart(const LineChart& chart);

}  // namespace heapscope::svg
