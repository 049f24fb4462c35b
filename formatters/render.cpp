#include "formatters/render.h"

#include <string>

namespace heapscope {

const char* format_name(OutputFormat format) {
  switch (format) {
    case OutputFormat::text: return "text";
    case OutputFormat::json: return "json";
    case OutputFormat::html: return "html";
    case OutputFormat::dot: return "dot";
    case OutputFormat::svg: return "svg";
  }
  return "?";
}

namespace {

// Which formats a report type has: text and JSON always, html and dot when an overload exists, so a
// renderer added in formatters/ is all it takes to offer a format.
template <typename R>
bool has_renderer(OutputFormat format) {
  switch (format) {
    case OutputFormat::text:
    case OutputFormat::json: return true;
    case OutputFormat::html: return requires(const R& r) { render_html(r); };
    case OutputFormat::dot: return requires(const R& r) { render_dot(r); };
    case OutputFormat::svg: return requires(const R& r) { render_svg(r); };
  }
  return false;
}

template <typename R>
std::string formats_of() {
  std::string list;
  for (OutputFormat f : kOutputFormats)
    if (has_renderer<R>(f)) list += (list.empty() ? "" : ", ") + std::string(format_name(f));
  return list;
}

template <typename R>
std::string render_one(const R& r, OutputFormat format) {
  if constexpr (requires { render_html(r); })
    if (format == OutputFormat::html) return render_html(r);
  if constexpr (requires { render_dot(r); })
    if (format == OutputFormat::dot) return render_dot(r);
  if constexpr (requires { render_svg(r); })
    if (format == OutputFormat::svg) return render_svg(r);
  if (format == OutputFormat::json) return render_json(r);
  if (format == OutputFormat::text) return render_text(r);
  throw UnsupportedFormat("this command has no " + std::string(format_name(format)) +
                          " output (it has: " + formats_of<R>() + ")");
}

}  // namespace

std::string render(const Report& report, OutputFormat format) {
  return std::visit([format](const auto& r) { return render_one(r, format); }, report);
}

}  // namespace heapscope
