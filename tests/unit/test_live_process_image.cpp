// LiveProcessImage over the test process itself and over a stopped child; StoppedProcess (ptrace_attach)
// stopping, reading registers of and letting go of a real child process.
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "core_builder.h"
#include "sources/live_process_image.h"
#include "sources/ptrace_attach.h"

using namespace heapscope;
using namespace heapscope::testing;

namespace {

// Distinct bytes per offset, so that a read from the wrong place cannot match.
unsigned char g_pattern[3 * 4096 + 123];

void fill_pattern(unsigned char* bytes, std::size_t size, unsigned seed) {
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>((i * 31 + seed) ^ (i >> 8));
}

std::unique_ptr<LiveProcessImage> open_live(int pid, std::vector<ThreadState> threads = {}) {
  std::string error;
  auto image = LiveProcessImage::open(pid, std::move(threads), {}, &error);
  INFO(error);
  REQUIRE(image);
  return image;
}

const Module* module_named(const Image& image, const std::string& part) {
  for (const Module& m : image.modules())
    if (m.path.find(part) != std::string::npos) return &m;
  return nullptr;
}

std::string status_field(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return line.substr(line.find_first_not_of(" \t", field.size() + 1));
  return "";
}

// The state letter of /proc/PID/status once it stops changing into `expected` (threads take a moment
// to leave a tracing stop after the detach).
char settled_state(int pid, char expected) {
  char state = '?';
  for (int i = 0; i < 200; ++i) {
    state = status_field(pid, "State").c_str()[0];
    if (state == expected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return state;
}

// A forked copy of this process that overwrites g_pattern with its own bytes, says so through a pipe
// and sleeps in pause(2) until killed.
class SleepingChild {
 public:
  static constexpr unsigned kSeed = 77;

  SleepingChild() {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      fill_pattern(g_pattern, sizeof g_pattern, kSeed);
      const char ready = 'R';
      if (write(fds[1], &ready, 1) != 1) _exit(1);
      for (;;) pause();
    }
    close(fds[1]);
    char ready = 0;
    const bool ok = read(fds[0], &ready, 1) == 1;
    close(fds[0]);
    if (!ok) throw std::runtime_error("the child did not start");
  }
  ~SleepingChild() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, __WALL);
  }
  SleepingChild(const SleepingChild&) = delete;
  SleepingChild& operator=(const SleepingChild&) = delete;
  int pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

int no_such_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;  // reaped: free, and pids are not reused at once
}

int record_load_bias(dl_phdr_info* info, size_t, void* data) {
  auto* biases = static_cast<std::vector<std::pair<std::string, Address>>*>(data);
  biases->emplace_back(info->dlpi_name ? info->dlpi_name : "", info->dlpi_addr);
  return 0;
}

}  // namespace

TEST_CASE("LiveProcessImage: regions and reads of the test process itself", "[live]") {
  fill_pattern(g_pattern, sizeof g_pattern, 5);
  std::vector<unsigned char> big(3 << 20);  // bigger than a cache line: read around the cache
  fill_pattern(big.data(), big.size(), 9);
  auto image = open_live(getpid());

  const auto& regions = image->regions();
  REQUIRE_FALSE(regions.empty());
  for (std::size_t i = 1; i < regions.size(); ++i) CHECK(regions[i - 1].end <= regions[i].start);
  const MemoryRegion* data = image->region_at(reinterpret_cast<Address>(g_pattern));
  REQUIRE(data);
  CHECK(data->readable);
  CHECK(data->writable);
  CHECK(data->bytes_present);

  SECTION("small reads go through the cache, also across its lines") {
    unsigned char buf[200];
    for (std::size_t offset : {0UL, 4000UL, 4096UL * 2 - 50, sizeof g_pattern - sizeof buf}) {  // the third crosses a page
      REQUIRE(image->read(reinterpret_cast<Address>(g_pattern) + offset, buf, sizeof buf) == sizeof buf);
      CHECK(std::memcmp(buf, g_pattern + offset, sizeof buf) == 0);
    }
    CHECK(image->read_u64(reinterpret_cast<Address>(g_pattern) + 8) ==
          std::optional<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(g_pattern + 8)));
  }
  SECTION("big reads are exact") {
    std::vector<unsigned char> copy(big.size());
    REQUIRE(image->read(reinterpret_cast<Address>(big.data()), copy.data(), copy.size()) == copy.size());
    CHECK(copy == big);
  }
  SECTION("reads stop at unreadable memory; view is always empty") {
    const long page = sysconf(_SC_PAGESIZE);
    auto* pages = static_cast<unsigned char*>(
        mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(pages != MAP_FAILED);
    REQUIRE(mprotect(pages + page, page, PROT_NONE) == 0);
    auto with_guard = open_live(getpid());
    const MemoryRegion* guard = with_guard->region_at(reinterpret_cast<Address>(pages + page));
    REQUIRE(guard);
    CHECK_FALSE(guard->readable);
    CHECK_FALSE(guard->bytes_present);
    std::vector<unsigned char> buf(2 * page);
    CHECK(with_guard->read(reinterpret_cast<Address>(pages + page - 16), buf.data(), 64) == 16);
    CHECK(with_guard->read(reinterpret_cast<Address>(pages + page), buf.data(), 8) == 0);
    CHECK(with_guard->view(reinterpret_cast<Address>(pages), 8).empty());
    munmap(pages, 3 * page);
  }
  SECTION("a file mapping longer than its file reads up to the end of the file's last page") {
    TempFile file("short-file");
    {
      std::ofstream out(file.path(), std::ios::binary);
      out << std::string(100, 'x');
    }
    const int fd = ::open(file.path().c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    const long page = sysconf(_SC_PAGESIZE);
    void* mapped = mmap(nullptr, 2 * page, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    REQUIRE(mapped != MAP_FAILED);
    auto with_file = open_live(getpid());
    const MemoryRegion* region = with_file->region_at(reinterpret_cast<Address>(mapped));
    REQUIRE(region);
    CHECK(region->backing_path == file.path());
    CHECK(region->file_offset == 0);
    std::vector<char> buf(2 * page);
    CHECK(with_file->read(reinterpret_cast<Address>(mapped), buf.data(), buf.size()) == static_cast<std::size_t>(page));
    CHECK(std::string(buf.data(), 100) == std::string(100, 'x'));
    munmap(mapped, 2 * page);
  }
}

TEST_CASE("LiveProcessImage: modules, load biases and auxv of the test process itself", "[live]") {
  auto image = open_live(getpid());
  CHECK(image->pid() == getpid());
  CHECK(image->description().find(std::to_string(getpid())) != std::string::npos);
  CHECK(image->auxv_value(AT_ENTRY) == std::optional<std::uint64_t>(getauxval(AT_ENTRY)));

  const Module* exe = image->main_executable();
  REQUIRE(exe);
  const auto code = reinterpret_cast<Address>(&fill_pattern);
  CHECK(image->module_at(code) == exe);
  CHECK(exe->file_on_disk == exe->path);
  CHECK_FALSE(image->link_map().empty());

  const Module* libc = module_named(*image, "libc.so");
  REQUIRE(libc);
  CHECK_FALSE(libc->build_id.empty());
  CHECK(libc->file_on_disk == libc->path);
  CHECK(image->module_at(reinterpret_cast<Address>(&std::memcpy)) != nullptr);
  CHECK(module_named(*image, "[vdso]"));

  // The dynamic linker's own view of every object's load bias.
  std::vector<std::pair<std::string, Address>> biases;
  dl_iterate_phdr(record_load_bias, &biases);
  REQUIRE_FALSE(biases.empty());
  CHECK(exe->load_bias == biases.front().second);
  for (const auto& [name, bias] : biases) {
    if (name.empty() || name.find("linux-vdso") != std::string::npos) continue;
    // The dynamic linker keeps the name it opened (/lib/x86_64-linux-gnu/libelf.so.1), the mappings the
    // file the kernel mapped (/usr/lib/x86_64-linux-gnu/libelf-0.188.so).
    const Module* m = module_named(*image, "/" + std::filesystem::canonical(name).filename().string());
    INFO(name);
    REQUIRE(m);
    CHECK(m->load_bias == bias);
  }
  for (const std::string& w : image->warnings()) CHECK(w.find("mismatch") == std::string::npos);
}

TEST_CASE("StoppedProcess: a stopped child is read through LiveProcessImage and let go unchanged", "[live][ptrace]") {
  fill_pattern(g_pattern, sizeof g_pattern, 1);
  SleepingChild child;
  REQUIRE(settled_state(child.pid(), 'S') == 'S');
  {
    std::string error;
    auto stopped = StoppedProcess::stop(child.pid(), &error);
    INFO(error);
    REQUIRE(stopped);
    CHECK(status_field(child.pid(), "TracerPid") == std::to_string(getpid()));
    CHECK(settled_state(child.pid(), 't') == 't');
    REQUIRE(stopped->threads().size() == 1);
    const ThreadState& thread = stopped->threads().front();
    CHECK(thread.tid == static_cast<std::uint32_t>(child.pid()));
    CHECK(thread.reg(Reg::rip) != 0);
    CHECK(thread.fs_base() != 0);

    auto image = open_live(child.pid(), stopped->threads());
    CHECK(image->threads().front().name.rfind("heapscope_unit", 0) == 0);
    CHECK(image->region_at(thread.sp()) != nullptr);
    unsigned char expected[sizeof g_pattern], seen[sizeof g_pattern];
    fill_pattern(expected, sizeof expected, SleepingChild::kSeed);
    REQUIRE(image->read(reinterpret_cast<Address>(g_pattern), seen, sizeof seen) == sizeof seen);
    CHECK(std::memcmp(seen, expected, sizeof seen) == 0);  // the child's bytes, not ours

    std::string second_error;
    CHECK_FALSE(StoppedProcess::stop(child.pid(), &second_error));
    CHECK(second_error.find("already traced by process " + std::to_string(getpid())) != std::string::npos);
  }
  CHECK(settled_state(child.pid(), 'S') == 'S');
  CHECK(status_field(child.pid(), "TracerPid") == "0");
}

TEST_CASE("run_with_process_stopped detaches when the work fails", "[live][ptrace]") {
  SleepingChild child;
  std::string error;
  std::size_t threads_seen = 0;
  CHECK_THROWS_WITH(run_with_process_stopped(
                        child.pid(),
                        [&](const std::vector<ThreadState>& threads) {
                          threads_seen = threads.size();
                          throw std::runtime_error("analysis failed");
                        },
                        &error),
                    "analysis failed");
  CHECK(threads_seen == 1);
  CHECK(status_field(child.pid(), "TracerPid") == "0");
  CHECK(settled_state(child.pid(), 'S') == 'S');
}

TEST_CASE("StoppedProcess and LiveProcessImage refuse impossible targets with one clear sentence", "[live][ptrace]") {
  std::string error;
  CHECK_FALSE(StoppedProcess::stop(getpid(), &error));
  CHECK(error == "heapscope cannot attach to itself");
  const int gone = no_such_pid();
  CHECK_FALSE(StoppedProcess::stop(gone, &error));
  CHECK(error == "there is no process with pid " + std::to_string(gone));
  CHECK_FALSE(LiveProcessImage::open(gone, {}, {}, &error));
  CHECK(error.find("there is no process with pid " + std::to_string(gone)) == 0);
  CHECK_FALSE(StoppedProcess::stop(-3, &error));
  CHECK(error == "-3 is not a process id");
}
