// The shared command grammar as the debugger frontends use it.
#include <catch2/catch.hpp>

#include <atomic>

#include "commands/command_line.h"
#include "fake_image.h"

using namespace heapscope;

TEST_CASE("command words split like a shell's simple cases") {
  CHECK(split_command_words("retainers  0x10 --paths 2") == std::vector<std::string>{"retainers", "0x10", "--paths", "2"});
  CHECK(split_command_words("retainers '&node->next' \"a b\"") ==
        std::vector<std::string>{"retainers", "&node->next", "a b"});
  CHECK(split_command_words("a\\ b ''") == std::vector<std::string>{"a b", ""});
  CHECK(split_command_words("   ").empty());
}

TEST_CASE("help lists every command of the table, and each command's options") {
  auto image = std::make_shared<testing::FakeImage>();
  Session session(image, {});
  const CommandResult overview = execute_command_line(session, {"help"});
  for (const CommandEntry& e : command_table()) CHECK_THAT(overview.output, Catch::Contains(e.name));
  const CommandResult help = execute_command_line(session, {"retainers", "--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.output, Catch::Contains("--max-depth") && Catch::Contains("ADDR"));
  CHECK(command_help("blocks").find("--state") != std::string::npos);
}

TEST_CASE("unknown commands, bad options and analysis failures are errors, not exceptions") {
  auto image = std::make_shared<testing::FakeImage>();
  Session session(image, {});
  const CommandResult unknown = execute_command_line(session, {"lekas"});
  CHECK(unknown.exit_code != 0);
  CHECK_THAT(unknown.error, Catch::Contains("unknown command 'lekas'"));
  const CommandResult bad = execute_command_line(session, {"blocks", "--state", "sideways"});
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.error, Catch::StartsWith("blocks:"));
  const CommandResult no_heap = execute_command_line(session, {"leaks"});  // the fake image has no libc
  CHECK(no_heap.exit_code != 0);
  CHECK_THAT(no_heap.error, Catch::Contains("libc"));
}

TEST_CASE("an interrupted analysis stops with an error and keeps nothing half-done") {
  auto image = std::make_shared<testing::FakeImage>();
  Session session(image, {});
  bool interrupt = true;
  session.set_interrupt_check([&interrupt] { return interrupt; });
  const CommandResult stopped = execute_command_line(session, {"leaks"});
  CHECK(stopped.exit_code != 0);
  CHECK_THAT(stopped.error, Catch::Contains("interrupted"));
  interrupt = false;  // the next command starts afresh (and here finds no libc, as a real walk would)
  const CommandResult again = execute_command_line(session, {"leaks"});
  CHECK_THAT(again.error, Catch::Contains("libc"));
}

TEST_CASE("a product computed beside the command's thread keeps no 'interrupted' it learnt from a product it needs") {
  auto image = std::make_shared<testing::FakeImage>();
  Session session(image, {});
  // The stop comes after the walk has begun, as it asks for the allocator: the beside thread's own Progress
  // has not polled it yet, the session's has.
  std::atomic<int> checks{0};
  session.set_interrupt_check([&checks] { return ++checks > 1; });
  CHECK_THROWS_WITH(session.compute_side_by_side([] {}, [&session] { session.heap(); }), Catch::Contains("interrupted"));
  session.set_interrupt_check({});
  const CommandResult again = execute_command_line(session, {"leaks"});
  CHECK_THAT(again.error, Catch::Contains("libc"));  // walked again (the fake image has no libc)
}

TEST_CASE("the output format comes from --format, else from the -o file's extension, else text") {
  OutputOptions options;
  CHECK(options.effective_format() == OutputFormat::text);
  options.path = "/tmp/run.1/report.HTML";
  CHECK(options.effective_format() == OutputFormat::html);
  options.path = "graph.gv";
  CHECK(options.effective_format() == OutputFormat::dot);
  options.path = "/tmp/dir.json/out";  // a dot in a directory name is no extension
  CHECK(options.effective_format() == OutputFormat::text);
  options.format = OutputFormat::json;
  options.path = "report.html";
  CHECK(options.effective_format() == OutputFormat::json);

  CLI::App app;
  OutputOptions parsed;
  add_output_options(app, parsed);
  app.parse(std::vector<std::string>{"JSON", "--format"});  // CLI11 takes the words last-first
  CHECK(parsed.format == OutputFormat::json);
  CHECK_THROWS_AS(app.parse(std::vector<std::string>{"xml", "--format"}), CLI::ValidationError);
}

TEST_CASE("a format a report has no renderer for is refused with the formats it has") {
  const Report report = SummaryReport{};
  CHECK_THAT(render(report, OutputFormat::text), !Catch::Equals(""));
  try {
    render(report, OutputFormat::dot);
    FAIL("dot output of a summary should be refused");
  } catch (const UnsupportedFormat& e) {
    CHECK_THAT(e.what(), Catch::Contains("no dot output") && Catch::Contains("text, json"));
  }
}
