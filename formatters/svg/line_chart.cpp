#include "formatters/svg/line_chart.h"

#include "formatters/markup.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace heapscope::svg {

namespace {

constexpr double kWidth = 900;
constexpr double kPlotLeft = 100, kPlotRight = 40, kPlotTop = 50, kPlotHeight = 320;
constexpr double kAxisLabelsHeight = 56;  // point labels and sublabels under the plot
constexpr double kLegendRowHeight = 20;
constexpr int kYTicks = 5;

// Distinct on white and for most colour-blind readers (Okabe–Ito, then darker tones).
constexpr const char* kColours[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00",
                                    "#56b4e9", "#000000", "#8c564b", "#7f7f7f", "#bcbd22"};

// The smallest of 1, 2, 2.5, 5 × 10^k at least `raw`: tick steps people read at a glance.
double nice_step(double raw) {
  if (raw <= 0) return 1;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * magnitude >= raw) return m * magnitude;
  return 10 * magnitude;
}

std::string number(double v) { return fmt::format("{:.1f}", v); }

}  // namespace

std::string render_line_chart(const LineChart& chart) {
  const std::size_t points = chart.point_labels.size();
  const double plot_width = kWidth - kPlotLeft - kPlotRight;
  const double plot_bottom = kPlotTop + kPlotHeight;
  const double legend_top = plot_bottom + kAxisLabelsHeight + 10;
  const double height = legend_top + kLegendRowHeight * static_cast<double>(chart.series.size()) + 10;
  auto label = [&](double v) { return chart.value_label ? chart.value_label(v) : fmt::format("{}", v); };

  double max_value = 0;
  for (const ChartSeries& s : chart.series)
    for (double v : s.values) max_value = std::max(max_value, v);
  double unit = 1;
  while (chart.binary_units && max_value >= unit * 1024) unit *= 1024;
  const double step = nice_step(max_value / unit / kYTicks) * unit;
  const double y_max = std::max(step, std::ceil(max_value / step) * step);
  auto x_of = [&](std::size_t p) {
    return points <= 1 ? kPlotLeft + plot_width / 2
                       : kPlotLeft + plot_width * static_cast<double>(p) / static_cast<double>(points - 1);
  };
  auto y_of = [&](double v) { return plot_bottom - kPlotHeight * v / y_max; };

  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n",
      kWidth, number(height));
  out += fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"white\"/>\n", kWidth, number(height));
  out += fmt::format("<text x=\"{}\" y=\"28\" font-size=\"16\" font-weight=\"bold\">{}</text>\n", kPlotLeft,
                     markup_escape(chart.title));

  // Horizontal grid lines with the y axis labels, then the axes.
  out += "<g class=\"y-axis\">\n";
  for (double v = 0; v <= y_max + step / 2; v += step) {
    const double y = y_of(v);
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#e0e0e0\"/>\n", kPlotLeft, number(y),
                       kPlotLeft + plot_width, number(y));
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", kPlotLeft - 8, number(y + 4),
                       markup_escape(label(v)));
  }
  out += "</g>\n";
  out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", kPlotLeft, kPlotTop,
                     plot_bottom);
  out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", kPlotLeft, plot_bottom,
                     kPlotLeft + plot_width);
  out += "<g class=\"x-axis\">\n";
  for (std::size_t p = 0; p < points; ++p) {
    // The last point's labels end at its tick, so a long name stays inside the picture.
    const char* anchor = (points > 1 && p + 1 == points) ? "end" : "middle";
    out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", number(x_of(p)),
                       plot_bottom, plot_bottom + 5);
    out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n", number(x_of(p)), plot_bottom + 20,
                       anchor, markup_escape(chart.point_labels[p]));
    if (p < chart.point_sublabels.size())
      out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\" font-size=\"10\" fill=\"#555\">{}</text>\n",
                         number(x_of(p)), plot_bottom + 36, anchor, markup_escape(chart.point_sublabels[p]));
  }
  out += "</g>\n";

  // One group per series: its line, a dot per point, and its legend entry.
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const ChartSeries& s = chart.series[i];
    const char* colour = kColours[i % std::size(kColours)];
    const char* width = s.highlighted ? "3" : "1.5";
    out += fmt::format("<g class=\"series\" data-name=\"{}\" data-highlighted=\"{}\">\n<title>{}</title>\n",
                       markup_escape(s.name), s.highlighted ? "true" : "false", markup_escape(s.name));
    std::string line;
    for (std::size_t p = 0; p < s.values.size() && p < points; ++p)
      line += fmt::format("{}{},{}", line.empty() ? "" : " ", number(x_of(p)), number(y_of(s.values[p])));
    out += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{} points=\"{}\"/>\n", colour, width,
                       s.highlighted ? "" : " stroke-dasharray=\"6 3\"", line);
    for (std::size_t p = 0; p < s.values.size() && p < points; ++p)
      out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"><title>{}: {}</title></circle>\n",
                         number(x_of(p)), number(y_of(s.values[p])), s.highlighted ? 4 : 3, colour,
                         markup_escape(s.name), markup_escape(label(s.values[p])));
    const double y = legend_top + kLegendRowHeight * static_cast<double>(i);
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"{}\"/>\n", kPlotLeft,
                       number(y), kPlotLeft + 28, number(y), colour, width);
    out += fmt::format("<text x=\"{}\" y=\"{}\"{}>{}{}</text>\n", kPlotLeft + 36, number(y + 4),
                       s.highlighted ? " font-weight=\"bold\"" : "", markup_escape(s.name),
                       s.highlighted ? markup_escape(chart.highlight_legend) : "");
    out += "</g>\n";
  }
  out += "</svg>\n";
  return out;
}

}  // namespace heapscope::svg
