#include "formatters/render.h"

namespace heapscope {

std::string render(const Report& report, OutputFormat format) {
  return std::visit(
      [format](const auto& r) { return format == OutputFormat::json ? render_json(r) : render_text(r); }, report);
}

}  // namespace heapscope
