#include "commands/command_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "queries/evolution.h"
#include "queries/heap_snapshot.h"

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
  CLI::Option* json =
      app.add_flag_callback("--json", [&options] { options.format = OutputFormat::json; }, "Same as --format json");
  CLI::Option* html = app.add_flag_callback(
      "--html", [&options] { options.format = OutputFormat::html; }, "Same as --format html, where the command has it");
  json->excludes(html);
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

// Opens each earlier core, one Session at a time so that only one heap is held at once, and saves its
// snapshot into the current session's store.
void save_earlier_cores(Session& session, CoreSeries& series) {
  std::string error;
  if (series.order_by_time && !order_by_write_time(series.cores, &error)) throw AnalysisError(error);
  series.names = core_snapshot_names(series.cores);
  const std::string current = current_state_name(session);
  for (std::size_t i = 0; i < series.names.size(); ++i)  // the current state keeps its own name
    if (series.names[i] == current) series.names[i] = series.cores[i];
  if (series.cores.empty()) return;
  if (!session.options().open_core)
    throw AnalysisError("this frontend cannot open other cores: compare with `snapshot save` and `snapshot diff` "
                        "between two stops instead");
  for (std::size_t i = 0; i < series.cores.size(); ++i) {
    std::unique_ptr<Session> earlier = session.options().open_core(series.cores[i], &error);
    if (!earlier) throw AnalysisError(error);
    earlier->set_interrupt_check(session.progress().interrupt_check());  // Ctrl-C stops its work too
    try {
      session.snapshots().save(take_snapshot(*earlier, series.names[i]));
    } catch (const AnalysisError& e) {
      throw AnalysisError(series.cores[i] + ": " + e.what());
    }
  }
}

}  // namespace

bool order_by_write_time(std::vector<std::string>& cores, std::string* error) {
  std::vector<std::pair<std::filesystem::file_time_type, std::string>> timed;
  for (const std::string& core : cores) {
    std::error_code failed;
    const auto written = std::filesystem::last_write_time(core, failed);
    if (failed) {
      *error = fmt::format("cannot read {}: {}", core, failed.message());
      return false;
    }
    timed.emplace_back(written, core);
  }
  std::stable_sort(timed.begin(), timed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < cores.size(); ++i) cores[i] = timed[i].second;
  return true;
}

std::vector<std::string> core_snapshot_names(const std::vector<std::string>& cores) {
  std::vector<std::string> names;
  for (const std::string& core : cores) names.push_back(std::filesystem::path(core).filename().string());
  for (std::size_t i = 0; i < names.size(); ++i)
    if (std::count(names.begin(), names.end(), names[i]) > 1) names[i] = cores[i];
  return names;
}

CommandResult run_command(Session& session, Command& command, const OutputOptions& options) {
  CommandResult result;
  try {
    const OutputFormat format = options.effective_format();
    CommandProgress progress(session.progress(), format != OutputFormat::json || options.progress_with_json);
    if (CoreSeries* series = command.core_series()) save_earlier_cores(session, *series);
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
