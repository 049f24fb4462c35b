#include "frontends/common/systemd_coredumps.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string_view>
#include <system_error>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/json_text.h"
#include "base/program_output.h"

namespace heapscope {

namespace {

// A stored core's name: core.COMM.UID.BOOTID.PID.TIME, then the compression's extension if any. COMM may
// itself hold dots, so the fields are taken from the right.
struct StoredName {
  std::string comm;
  std::uint32_t uid = 0;
  int pid = 0;
  std::int64_t time_us = 0;
};

template <class Number>
bool parse_number(std::string_view text, Number& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

std::optional<StoredName> parse_stored_name(std::string_view name) {
  if (!name.starts_with("core.")) return std::nullopt;
  name.remove_prefix(5);
  for (std::string_view extension : {".zst", ".lz4", ".xz"})
    if (name.ends_with(extension)) {
      name.remove_suffix(extension.size());
      break;
    }
  std::string_view fields[4];  // UID BOOTID PID TIME, the last four
  for (int i = 3; i >= 0; --i) {
    const std::size_t dot = name.rfind('.');
    if (dot == std::string_view::npos) return std::nullopt;
    fields[i] = name.substr(dot + 1);
    name = name.substr(0, dot);
  }
  StoredName stored;
  stored.comm = std::string(name);
  if (!parse_number(fields[0], stored.uid) || !parse_number(fields[2], stored.pid) ||
      !parse_number(fields[3], stored.time_us) || fields[1].size() != 32)
    return std::nullopt;
  return stored;
}

// Each entry's file: the store's file of the same pid and uid whose crash time (whole seconds) is the
// latest at or before the journal's record of it (a second's slack for the rounding).
void find_stored_files(std::vector<JournalCore>& cores, const std::string& store) {
  std::vector<std::pair<StoredName, std::string>> stored;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(store, ec))
    if (std::optional<StoredName> name = parse_stored_name(entry.path().filename().string()))
      stored.emplace_back(std::move(*name), entry.path().string());
  for (JournalCore& core : cores) {
    const std::pair<StoredName, std::string>* best = nullptr;
    for (const auto& candidate : stored) {
      const StoredName& n = candidate.first;
      if (n.pid != core.pid || n.uid != core.uid || n.time_us > core.time_us + 1'000'000) continue;
      if (!best || n.time_us > best->first.time_us) best = &candidate;
    }
    if (!best) continue;
    core.path = best->second;
    core.comm = best->first.comm;
  }
}

std::optional<std::string> read_list(const CoredumpSource& source, std::string* error) {
  if (source.list_file == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  if (!source.list_file.empty()) {
    std::ifstream in(source.list_file, std::ios::binary);
    if (!in) {
      *error = fmt::format("cannot read {}: {}", source.list_file, std::strerror(errno));
      return std::nullopt;
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  const std::optional<ProgramOutput> listed =
      program_output({"coredumpctl", "--json=short", "--no-pager", "--quiet", "list"});
  if (!listed) {
    *error = "coredumpctl is not installed: systemd-coredump keeps no cores here (Debian: apt install "
             "systemd-coredump); for cores copied from another machine give --coredump-list FILE, coredumpctl's "
             "JSON from there (coredumpctl --json=short list), and --coredump-store DIR";
    return std::nullopt;
  }
  // With no core in the journal coredumpctl prints nothing and exits 1.
  if (listed->exit_code != 0 && listed->out.find_first_not_of(" \n") == std::string::npos) return std::string("[]");
  return listed->out;
}

template <class Number>
Number number_or(const nlohmann::json& entry, const char* key, Number otherwise) {
  const auto it = entry.find(key);
  return it != entry.end() && it->is_number_integer() ? it->template get<Number>() : otherwise;
}

std::string local_time(std::int64_t time_us) {
  const std::time_t seconds = static_cast<std::time_t>(time_us / 1'000'000);
  std::tm tm{};
  ::localtime_r(&seconds, &tm);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S %Z", &tm);
  return text;
}

std::string program_name(const JournalCore& core) {
  if (!core.exe.empty()) return std::filesystem::path(core.exe).filename().string();
  return core.comm;
}

}  // namespace

std::optional<std::vector<JournalCore>> journal_cores(const CoredumpSource& source, std::string* error) {
  const std::optional<std::string> text = read_list(source, error);
  if (!text) return std::nullopt;
  const std::string from = source.list_file.empty() ? "coredumpctl's list" : source.list_file;
  nlohmann::json list = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.is_array()) {
    *error = fmt::format("{} is not coredumpctl's JSON (an array of cores, as coredumpctl --json=short list prints)",
                         from);
    return std::nullopt;
  }
  std::vector<JournalCore> cores;
  for (const nlohmann::json& entry : list) {
    if (!entry.is_object() || !entry.contains("pid") || !entry.contains("time") || !entry["time"].is_number_integer() ||
        !entry["pid"].is_number_integer()) {
      *error = fmt::format("{} holds an entry without a pid and a time: {}", from, json_text(entry));
      return std::nullopt;
    }
    JournalCore core;
    core.time_us = entry["time"].get<std::int64_t>();
    core.pid = entry["pid"].get<int>();
    // The rest may be null where the journal lacks a field (coredumpctl prints "n/a" in its table).
    core.uid = number_or(entry, "uid", std::uint32_t{0});
    core.signal = number_or(entry, "sig", 0);
    core.size = number_or(entry, "size", std::uint64_t{0});
    if (entry.contains("corefile") && entry["corefile"].is_string()) core.state = entry["corefile"].get<std::string>();
    if (entry.contains("exe") && entry["exe"].is_string()) core.exe = entry["exe"].get<std::string>();
    cores.push_back(std::move(core));
  }
  find_stored_files(cores, source.store);
  std::stable_sort(cores.begin(), cores.end(), [](const JournalCore& a, const JournalCore& b) { return a.time_us > b.time_us; });
  return cores;
}

std::string pick_coredump(const std::vector<JournalCore>& cores, const std::string& match, std::string* error) {
  int pid = 0;
  const bool by_pid = parse_number(std::string_view(match), pid);
  auto matches = [&](const JournalCore& c) {
    if (by_pid) return c.pid == pid;
    return c.exe == match || program_name(c) == match || (!c.comm.empty() && c.comm == match);
  };
  const auto newest = std::find_if(cores.begin(), cores.end(), matches);  // the list is newest first
  if (newest == cores.end()) {
    *error = fmt::format("no core of {} {} in the journal ({} cores; `heapscope coredumps` lists them)",
                         by_pid ? "pid" : "program", match, cores.size());
    return {};
  }
  if (newest->path.empty()) {
    *error = fmt::format("the newest core of {} (pid {}, {}) is not in the store: coredumpctl says its file is {}",
                         match, newest->pid, local_time(newest->time_us), newest->state.empty() ? "unknown" : newest->state);
    return {};
  }
  return newest->path;
}

std::string coredumps_text(const std::vector<JournalCore>& cores, const CoredumpSource& source) {
  if (cores.empty()) return "No cores in the journal.\n";
  std::string out = fmt::format("{:<23}  {:>7}  {:>3}  {:<9}  {:<20}  {}\n", "TIME", "PID", "SIG", "COREFILE", "PROGRAM", "FILE");
  for (const JournalCore& c : cores)
    out += fmt::format("{:<23}  {:>7}  {:>3}  {:<9}  {:<20}  {}\n", local_time(c.time_us), c.pid, c.signal, c.state,
                       program_name(c), c.path.empty() ? "(not in " + source.store + ")" : c.path);
  out += "Analyse one with --coredump PID or --coredump PROGRAM (its newest core): heapscope leaks --coredump " +
         std::to_string(cores.front().pid) + "\n";
  return out;
}

std::string coredumps_json(const std::vector<JournalCore>& cores) {
  nlohmann::json list = nlohmann::json::array();
  for (const JournalCore& c : cores)
    list.push_back({{"time_us", c.time_us}, {"pid", c.pid}, {"uid", c.uid}, {"signal", c.signal},
                    {"corefile", c.state}, {"exe", c.exe}, {"size", c.size}, {"comm", c.comm},
                    {"file", c.path.empty() ? nlohmann::json() : nlohmann::json(c.path)}});
  return json_text(list, 2) + "\n";
}

}  // namespace heapscope
