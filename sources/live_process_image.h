// LiveProcessImage: an Image over a stopped live process, read through /proc.
//
// Regions come from /proc/PID/maps, memory from pread(2) on /proc/PID/mem (ProcessMemory: a small cache
// of recently read stretches), auxv from /proc/PID/auxv and modules from the file mappings plus the dynamic
// linker's link_map, exactly as for a core (engine/image/module_layout.h). Threads and their registers
// are handed in by whoever stopped the process — `heapscope attach` (ptrace_attach.h) or a debugger
// frontend (the C API) — because only the tracer can read them.
//
// Strictly read-only: the process's memory and registers are never written. Its threads must stay
// stopped for as long as the image is used; otherwise reads see a heap that moves underneath them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "image/collected_image.h"
#include "image/link_map.h"
#include "sources/process_memory.h"

namespace heapscope {

struct LiveProcessOptions {
  std::string executable;  // file to use for the main executable instead of the path the process has
  std::vector<std::pair<std::string, std::string>> path_map;  // module path prefix substitutions
};

// /proc/PID/cmdline, its arguments joined by spaces; empty when it cannot be read (a zombie, a kernel thread).
std::string proc_command_line(int pid);

class LiveProcessImage : public CollectedImage {
 public:
  // Null with a one-sentence *error when /proc/PID cannot be read (no such process, permission denied).
  // Threads without a name get theirs from /proc/PID/task/TID/comm.
  static std::unique_ptr<LiveProcessImage> open(int pid, std::vector<ThreadState> threads,
                                                const LiveProcessOptions& opts, std::string* error);
  ~LiveProcessImage() override;
  LiveProcessImage(const LiveProcessImage&) = delete;
  LiveProcessImage& operator=(const LiveProcessImage&) = delete;

  std::string description() const override;
  int pid() const override { return pid_; }
  const std::string& process_name() const { return process_name_; }  // /proc/PID/comm: 16 bytes at most
  const std::string& command_line() const { return command_line_; }
  const std::vector<LinkMapEntry>& link_map() const { return link_map_; }

  // Reads stop at the first byte of an unreadable region or of a page the kernel refuses to read.
  std::size_t read(Address addr, void* out, std::size_t len) const override;
  // Always empty: cached bytes may be replaced by another thread's read at any time, so no view of them
  // can outlive the call. Callers fall back to read().
  std::span<const std::byte> view(Address addr, std::size_t len) const override;

 private:
  LiveProcessImage() = default;

  int pid_ = 0;
  std::unique_ptr<ProcessMemory> memory_;
  std::string process_name_;
  std::string command_line_;  // /proc/PID/cmdline, its arguments joined by spaces
  std::vector<LinkMapEntry> link_map_;
};

}  // namespace heapscope
