#include "commands/command_line.h"
#include "commands/option_checks.h"

#include <fmt/format.h>

#include <algorithm>

namespace heapscope {

namespace {

struct Parsed {
  std::unique_ptr<CLI::App> app;
  std::unique_ptr<Command> command;
  OutputOptions output;
};

Parsed make_app(const CommandEntry& entry, const std::string& prefix) {
  Parsed p;
  p.app = std::make_unique<CLI::App>(entry.description, prefix + " " + entry.name);
  p.command = entry.make();
  p.command->add_options(*p.app);
  add_output_options(*p.app, p.output);
  return p;
}

std::string overview(const std::string& prefix) {
  std::string out = fmt::format("{} <command> [options]: find leaks and explain heap retention.\n\nCommands:\n", prefix);
  for (const CommandEntry& e : command_table()) out += fmt::format("  {:<13}  {}\n", e.name, e.description);
  out += fmt::format("\n'{} <command> --help' shows a command's options.\n", prefix);
  return out;
}

}  // namespace

std::string command_help(const std::string& name, const std::string& prefix) {
  const CommandEntry* entry = find_command(name);
  if (!entry) return overview(prefix);
  return make_app(*entry, prefix).app->help();
}

CommandResult execute_command_line(Session& session, const std::vector<std::string>& words, bool progress_with_json) {
  CommandResult result;
  if (words.empty() || words[0] == "help" || words[0] == "--help" || words[0] == "-h") {
    result.output = words.size() > 1 ? command_help(words[1]) : overview("heap");
    return result;
  }
  const CommandEntry* entry = find_command(words[0]);
  if (!entry) {
    result.exit_code = 1;
    std::vector<std::string> names;
    for (const CommandEntry& e : command_table()) names.emplace_back(e.name);
    result.error = unknown_command_message(words[0], names, "'heap help' lists the commands");
    return result;
  }
  Parsed p = make_app(*entry, "heap");
  std::vector<std::string> args(words.begin() + 1, words.end());
  std::reverse(args.begin(), args.end());  // CLI11 takes the words last-first
  try {
    p.app->parse(args);
  } catch (const CLI::CallForHelp&) {
    result.output = p.app->help();
    return result;
  } catch (const CLI::ParseError& e) {
    result.exit_code = 1;
    result.error = fmt::format("{}: {}", entry->name, e.what());
    return result;
  }
  p.output.progress_with_json = progress_with_json;
  result = run_command(session, *p.command, p.output);
  if (result.exit_code != 0) result.error = fmt::format("{}: {}", entry->name, result.error);
  return result;
}

std::vector<std::string> split_command_words(const std::string& text) {
  std::vector<std::string> words;
  std::string current;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size() && quote != '\'') {
      current += text[++i];
      in_word = true;
    } else if (quote) {
      if (c == quote) quote = 0;
      else current += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(current));
      current.clear();
      in_word = false;
    } else {
      current += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(current));
  return words;
}

}  // namespace heapscope
