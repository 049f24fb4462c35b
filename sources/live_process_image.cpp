#include "sources/live_process_image.h"

#include <elf.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "image/module_layout.h"
#include "sources/proc_maps.h"
#include "sources/process_identity.h"

namespace heapscope {

namespace {

std::string proc_path(int pid, const std::string& entry) { return fmt::format("/proc/{}/{}", pid, entry); }

std::string errno_text(int err) { return std::strerror(err); }

// Why /proc/PID/<entry> could not be opened, as one sentence.
std::string proc_open_error(int pid, const std::string& entry, int err) {
  if (err == ENOENT || err == ESRCH)
    return fmt::format("there is no process with pid {} (/proc/{} does not exist)", pid, pid);
  if (err == EACCES || err == EPERM)
    return fmt::format("permission denied reading {}: heapscope must run as the process's user and be allowed to "
                       "trace it (root, or see /proc/sys/kernel/yama/ptrace_scope)",
                       proc_path(pid, entry));
  return fmt::format("cannot read {}: {}", proc_path(pid, entry), errno_text(err));
}

bool read_text_file(const std::string& path, std::string* out, int* err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *err = errno != 0 ? errno : EIO;
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::vector<AuxvEntry> parse_auxv(const std::string& bytes) {
  std::vector<AuxvEntry> auxv;
  for (std::size_t pos = 0; pos + 16 <= bytes.size(); pos += 16) {
    AuxvEntry e;
    std::memcpy(&e.type, bytes.data() + pos, 8);
    std::memcpy(&e.value, bytes.data() + pos + 8, 8);
    if (e.type == AT_NULL) break;
    auxv.push_back(e);
  }
  return auxv;
}

}  // namespace

std::string proc_command_line(int pid) {
  std::string cmdline;
  int err = 0;
  return read_text_file(proc_path(pid, "cmdline"), &cmdline, &err) ? joined_arguments(cmdline) : std::string();
}

std::unique_ptr<LiveProcessImage> LiveProcessImage::open(int pid, std::vector<ThreadState> threads,
                                                         const LiveProcessOptions& opts, std::string* error) {
  auto fail = [&](std::string why) -> std::unique_ptr<LiveProcessImage> {
    if (error) *error = std::move(why);
    return nullptr;
  };
  if (pid <= 0) return fail(fmt::format("{} is not a process id", pid));
  std::unique_ptr<LiveProcessImage> image(new LiveProcessImage());
  image->pid_ = pid;

  std::string maps_text, auxv_bytes, comm;
  int err = 0;
  if (!read_text_file(proc_path(pid, "maps"), &maps_text, &err)) return fail(proc_open_error(pid, "maps", err));
  image->memory_ = ProcessMemory::open(pid, &err);
  if (!image->memory_) return fail(proc_open_error(pid, "mem", err));
  if (!read_text_file(proc_path(pid, "auxv"), &auxv_bytes, &err)) return fail(proc_open_error(pid, "auxv", err));
  if (maps_text.empty())
    return fail(fmt::format("process {} has no memory mappings (a zombie, or a kernel thread)", pid));
  image->auxv_ = parse_auxv(auxv_bytes);
  if (read_text_file(proc_path(pid, "comm"), &comm, &err)) image->process_name_ = first_line(comm);
  image->command_line_ = proc_command_line(pid);

  std::vector<FileMapping> file_mappings;
  std::optional<std::pair<Address, Address>> vdso_extent;
  std::istringstream lines(maps_text);
  std::size_t unparsed = 0;
  for (std::string line; std::getline(lines, line);) {
    auto m = parse_maps_line(line);
    if (!m || (!image->regions_.empty() && m->region.start < image->regions_.back().end)) {
      ++unparsed;
      continue;
    }
    if (m->name == "[vdso]") vdso_extent = std::make_pair(m->region.start, m->region.end);
    if (!m->region.backing_path.empty())
      file_mappings.push_back(FileMapping{m->region.start, m->region.end, m->region.file_offset, m->name});
    image->regions_.push_back(std::move(m->region));
  }
  if (unparsed > 0)
    image->warnings_.push_back(fmt::format("{} lines of /proc/{}/maps could not be read and were ignored", unparsed, pid));

  for (ThreadState& t : threads) {
    std::string name;
    if (t.name.empty() && read_text_file(proc_path(pid, fmt::format("task/{}/comm", t.tid)), &name, &err))
      t.name = first_line(name);
  }
  image->threads_ = std::move(threads);
  if (image->threads_.empty())
    image->warnings_.push_back("no thread registers were given, so registers and stacks are not roots");

  ModuleLayoutInputs inputs;
  inputs.read = memory_reader_for(*image);
  inputs.mappings = std::move(file_mappings);
  inputs.auxv = image->auxv_;
  inputs.vdso_extent = vdso_extent;
  inputs.executable = opts.executable;
  // A program whose file was replaced or deleted since it started is still reachable through /proc.
  const auto entry = image->auxv_value(AT_ENTRY);
  const MemoryRegion* main_region = entry ? image->region_at(*entry) : nullptr;
  if (inputs.executable.empty() && main_region && main_region->backing_path.ends_with(" (deleted)"))
    inputs.executable = proc_path(pid, "exe");
  inputs.path_map = opts.path_map;
  inputs.source_noun = "process";
  ModuleLayout layout = discover_modules(inputs, &image->warnings_);
  image->modules_ = std::move(layout.modules);
  image->link_map_ = std::move(layout.link_map);
  return image;
}

LiveProcessImage::~LiveProcessImage() = default;

std::string LiveProcessImage::description() const {
  return fmt::format("live process {} ({})", pid_, process_identity(*this, command_line_, process_name_));
}

std::size_t LiveProcessImage::read(Address addr, void* out, std::size_t len) const {
  return memory_->read_regions(*this, addr, out, len);
}

std::span<const std::byte> LiveProcessImage::view(Address addr, std::size_t len) const {
  (void)addr;
  (void)len;
  return {};
}

}  // namespace heapscope
