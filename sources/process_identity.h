// How the image sources name the process they read. The kernel's name of a process (comm, NT_PRPSINFO's
// pr_fname) is 16 bytes: "redis-server 127.0.0.1:6379" becomes "redis-server 127". Its command line says
// which instance it is, and the file it runs says which program: redis-server is a link to redis-check-rdb.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "elf/elf_file.h"
#include "image/image.h"

namespace heapscope {

// "redis-server 127.0.0.1:6379 --port 7000; executable /usr/bin/redis-check-rdb": the command line (the
// kernel's `short_name` when it is unknown) and the main executable's path, which the kernel records with
// its links resolved (NT_FILE, /proc/PID/maps).
std::string process_identity(const Image& image, std::string_view command_line, std::string_view short_name);

// The arguments of a command line the kernel keeps NUL-separated (/proc/PID/cmdline, NT_PRPSINFO's
// pr_psargs), joined by spaces as `ps` shows them, trailing separators dropped.
std::string joined_arguments(std::string_view nul_separated);

// What a core's process note (NT_PRPSINFO, struct elf_prpsinfo on x86-64) says of the process.
struct ProcessNote {
  int pid = 0;
  std::string name;          // pr_fname: 16 bytes at most
  std::string command_line;  // pr_psargs: the command line's first 80 bytes, arguments joined by spaces
};
// Nullopt when the note is too short to hold the name.
std::optional<ProcessNote> decode_process_note(std::span<const std::byte> desc);
// The first process note in the notes of core file `core`, for a frontend whose debugger read the core.
std::optional<ProcessNote> core_process_note(const ElfFile& core);

}  // namespace heapscope
