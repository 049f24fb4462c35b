#include "commands/command_runner.h"

namespace heapscope {

void add_output_options(CLI::App& app, OutputFormat& format) {
  app.add_flag_callback("--json", [&format] { format = OutputFormat::json; }, "Print the report as JSON (docs/json.md)");
}

CommandResult run_command(Session& session, Command& command, OutputFormat format) {
  CommandResult result;
  try {
    result.output = render(command.run(session), format);
  } catch (const AnalysisError& e) {
    result.exit_code = 1;
    result.error = e.what();
  } catch (const std::bad_alloc&) {
    result.exit_code = 1;
    result.error = "out of memory while analysing the image";
  }
  return result;
}

}  // namespace heapscope
