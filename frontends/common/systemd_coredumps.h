// The cores systemd-coredump keeps: `coredumpctl --json=short list` says which the journal knows (when,
// which process, whether the file is still there), and the store (/var/lib/systemd/coredump) holds them as
// core.COMM.UID.BOOTID.PID.TIME[.zst|.lz4|.xz], zstd-compressed by default (sources/compressed_core.h
// opens those). coredumpctl's list names no file, so each entry's file is found in the store by its
// name: the same pid and uid, the crash time (TIME, in whole seconds) at or just before the journal's.
//
// For a store copied from another machine, coredumpctl's JSON can come from a file instead
// (`coredumpctl --json=short list > list.json` there), with the store's directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace heapscope {

struct JournalCore {
  std::int64_t time_us = 0;  // when the journal recorded it (µs since the epoch)
  int pid = 0;
  std::uint32_t uid = 0;
  int signal = 0;
  std::string state;  // coredumpctl's COREFILE: present, missing, inaccessible, truncated, none, journal, error
  std::string exe;    // the program's path
  std::uint64_t size = 0;  // of the stored (compressed) file
  std::string comm;   // the process's name, from the stored file's name
  std::string path;   // the stored file, found in the store; empty when it is not there
};

struct CoredumpSource {
  std::string list_file;  // coredumpctl's JSON in a file ("-": standard input); empty: run coredumpctl
  std::string store = "/var/lib/systemd/coredump";
};

// The journal's cores, newest first; nullopt with *error when coredumpctl is missing or its JSON unreadable.
std::optional<std::vector<JournalCore>> journal_cores(const CoredumpSource& source, std::string* error);

// The newest core whose pid is `match` (all digits) or whose program is (its path, its file name, or the
// process name); its stored file's path, or empty with *error saying why (no such core, its file gone).
std::string pick_coredump(const std::vector<JournalCore>& cores, const std::string& match, std::string* error);

// The coredumps listing, one line a core (newest first), and as JSON.
std::string coredumps_text(const std::vector<JournalCore>& cores, const CoredumpSource& source);
std::string coredumps_json(const std::vector<JournalCore>& cores);

}  // namespace heapscope
