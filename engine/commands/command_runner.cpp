#include "commands/command_runner.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace heapscope {

void add_output_options(CLI::App& app, OutputOptions& options) {
  std::vector<std::string> names;
  for (OutputFormat f : kOutputFormats) names.push_back(format_name(f));
  app.add_option_function<std::string>(
         "--format",
         [&options](const std::string& name) {
           for (OutputFormat f : kOutputFormats)
             if (CLI::detail::to_lower(name) == format_name(f)) options.format = f;
         },
         "Output format: text, json (docs/json.md), html (a self-contained page) or dot (Graphviz), where the "
         "command has it")
      ->check(CLI::IsMember(names, CLI::ignore_case))
      ->option_text("FORMAT");
  app.add_flag_callback(
      "--json", [&options] { options.format = OutputFormat::json; }, "Same as --format json");
  app.add_option("-o,--output", options.path, "Write the report to this file instead of printing it")
      ->option_text("FILE");
}

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw AnalysisError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

}  // namespace

CommandResult run_command(Session& session, Command& command, const OutputOptions& options) {
  CommandResult result;
  try {
    std::string text = render(command.run(session), options.format);
    if (options.path.empty()) {
      result.output = std::move(text);
    } else {
      write_file(options.path, text);
      result.output = fmt::format("wrote {} ({} bytes, {})\n", options.path, text.size(), format_name(options.format));
    }
  } catch (const AnalysisError& e) {
    result.exit_code = 1;
    result.error = e.what();
  } catch (const UnsupportedFormat& e) {
    result.exit_code = 1;
    result.error = e.what();
  } catch (const std::bad_alloc&) {
    result.exit_code = 1;
    result.error = "out of memory while analysing the image";
  }
  return result;
}

}  // namespace heapscope
