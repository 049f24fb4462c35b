// LldbImage: an Image over the process LLDB has stopped (a live process or a core loaded with
// `target create --core`), read through the SB API.
//
// Regions, threads (frame 0 registers) and modules are read once when the image is made, on the LLDB
// thread. Memory is read on demand, from any thread: for a live process on this machine straight from
// /proc/PID/mem (sources/process_memory.h, as `heapscope attach` reads it; LLDB keeps the process
// stopped), which costs a pread where a read through LLDB costs a round trip to lldb-server on the LLDB
// thread; for a core, straight from the core file LLDB has mapped (core_file_memory.h), what LLDB reads
// it from; otherwise (a remote process, /proc/PID/mem not readable or not the same process, a core whose
// file is not found or holds other bytes, what a core left out) through a page cache (page_cache.h) whose
// misses LLDB serves on its own thread (base/serving_thread.h). An image describes one stop of the
// process: the plugin makes a new one whenever the process has run.
//
// Where LLDB 16 falls short:
//   - it shows no fs_base (x86-64 Linux, live or core); glibc's thread list supplies the thread
//     pointers instead (thread_pointers.h);
//   - it has no SB call for auxv; a live process on this host shows it in /proc, a core's is left out
//     (nothing in the engine needs it once modules are known);
//   - it names no mappings of a core; file-backed ones are named after the module whose segments they
//     hold, so that they are not mistaken for anonymous memory;
//   - a core leaves out read-only file-backed memory; such reads fall back to the module files
//     (SBTarget::ReadMemory reads a section from the file).
#pragma once

#include <lldb/API/LLDB.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "image/collected_image.h"
#include "base/serving_thread.h"
#include "frontends/lldb/core_file_memory.h"
#include "frontends/lldb/page_cache.h"
#include "sources/process_memory.h"

namespace heapscope::lldb_plugin {

class LldbImage : public CollectedImage {
 public:
  // Call on the LLDB thread, with the process stopped.
  LldbImage(lldb::SBProcess process, ServingThread& lldb_thread);

  std::string description() const override { return description_; }
  // For a core with no shared library loaded (LLDB's dynamic loader found none: the executable is missing
  // or another program's), why, and what to run instead; empty otherwise.
  std::string damage() const override;
  int pid() const override { return pid_; }

  std::size_t read(Address addr, void* out, std::size_t len) const override;
  std::span<const std::byte> view(Address addr, std::size_t len) const override;

  bool is_core() const { return is_core_; }
  // Memory comes from /proc/PID/mem rather than through LLDB.
  bool reads_proc_memory() const { return proc_memory_ != nullptr; }

 private:
  // A stretch of a module file mapped into the process, for naming the core's unnamed regions.
  struct FileBackedRange {
    Address start = 0;
    Address end = 0;
    std::string path;
    std::uint64_t file_offset = 0;
  };

  void read_regions();
  void mark_unreadable_core_bytes();
  bool reads_at(Address addr) const;
  void read_threads();
  void read_modules();
  void add_module(lldb::SBTarget& target, lldb::SBModule module, bool is_main_executable, std::uint32_t position);
  void name_file_backed_regions();
  void complete_thread_pointers();
  bool is_local_process() const;
  void read_live_auxv();
  void open_proc_memory();
  void open_core_file();
  // The process's command line: /proc/PID/cmdline for a live process; for a core its arguments in memory,
  // else the core file's process note (its name when the note has no arguments); empty when none is at hand.
  std::string command_line() const;
  bool holds_what_lldb_reads(const CoreFileMemory& core) const;
  // Whether `read` gives what LLDB reads at each probe (address, length), and some probe was readable.
  using Read = std::function<std::size_t(Address addr, void* out, std::size_t len)>;
  bool reads_as_lldb(const std::vector<std::pair<Address, std::size_t>>& probes, const Read& read) const;
  std::size_t read_core_file(Address addr, void* out, std::size_t len) const;
  std::size_t read_from_lldb(Address addr, void* out, std::size_t len) const;

  lldb::SBProcess process_;
  ServingThread& lldb_thread_;
  bool is_core_ = false;
  int pid_ = 0;
  std::string description_;
  std::vector<bool> thread_pointer_known_;  // per thread: LLDB showed fs_base
  std::vector<FileBackedRange> file_backed_;
  mutable std::unique_ptr<PageCache> cache_;
  std::unique_ptr<ProcessMemory> proc_memory_;
  std::unique_ptr<CoreFileMemory> core_file_;
};

}  // namespace heapscope::lldb_plugin
