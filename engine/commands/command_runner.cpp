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
         "Output format: text, json (docs/json.md), html (a self-contained page), dot (Graphviz) or svg, where the "
         "command has it; default: from the -o file's extension, else text")
      ->check(CLI::IsMember(names, CLI::ignore_case))
      ->option_text("FORMAT");
  app.add_flag_callback(
      "--json", [&options] { options.format = OutputFormat::json; }, "Same as --format json");
  app.add_option("-o,--output", options.path,
                 "Write the report to this file instead of printing it (report.html is HTML, and so on)")
      ->option_text("FILE");
}

OutputFormat OutputOptions::effective_format() const {
  if (format) return *format;
  const std::size_t dot = path.rfind('.');
  if (dot == std::string::npos || path.find('/', dot) != std::string::npos) return OutputFormat::text;
  std::string extension = CLI::detail::to_lower(path.substr(dot + 1));
  if (extension == "htm") extension = "html";
  if (extension == "gv") extension = "dot";
  if (extension == "txt" || extension == "log" || extension == "out") return OutputFormat::text;
  for (OutputFormat f : kOutputFormats)
    if (extension == format_name(f)) return f;
  // A picture or document format heapscope does not write (x.png, x.pdf): text under that name would
  // only fail to open later.
  throw UnsupportedFormat(fmt::format(
      "cannot write {}: heapscope writes text (.txt), JSON (.json), HTML (.html), Graphviz (.dot) and SVG (.svg), "
      "not .{} files; for a PNG, write .dot or .svg and convert it (dot -Tpng), or give --format to write that "
      "format under this name",
      path, path.substr(dot + 1)));
}

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out) throw AnalysisError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
}

// The session's progress for one command: shown (after its delay) unless the output is JSON, cleared at
// the end however the command ends. Current on this thread for the whole command, so that the query's
// own loops (between and after the products it asks for) can be interrupted too; while they run, the
// phase shown is "report".
class CommandProgress {
 public:
  CommandProgress(Progress& progress, bool show) : progress_(progress), current_(&progress) {
    progress_.begin(show);
    progress_.push_phase("report");
  }
  ~CommandProgress() {
    progress_.pop_phase();
    progress_.end();
  }
  CommandProgress(const CommandProgress&) = delete;
  CommandProgress& operator=(const CommandProgress&) = delete;

 private:
  Progress& progress_;
  ProgressScope current_;
};

}  // namespace

CommandResult run_command(Session& session, Command& command, const OutputOptions& options) {
  CommandResult result;
  try {
    const OutputFormat format = options.effective_format();
    CommandProgress progress(session.progress(), format != OutputFormat::json);
    Report report = command.run(session);
    std::visit([&](auto& r) { r.warnings = session.warnings_with(std::move(r.warnings)); }, report);
    std::string text = render(report, format);
    if (options.path.empty()) {
      result.output = std::move(text);
    } else {
      write_file(options.path, text);
      result.output = fmt::format("wrote {} ({} bytes, {})\n", options.path, text.size(), format_name(format));
    }
  } catch (const Interrupted& e) {  // in the query's own loops (a product turns it into AnalysisError)
    result.exit_code = 1;
    result.error = e.what();
  } catch (const AnalysisError& e) {
    result.exit_code = 1;
    result.error = e.what();
    // What is wrong with the image comes first: it is why the analysis failed.
    if (const std::string damage = session.image().damage(); !damage.empty())
      result.error = fmt::format("{} (and so: {})", damage, e.what());
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
