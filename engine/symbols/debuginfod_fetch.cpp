#include "symbols/debuginfod_fetch.h"

#include <elfutils/debuginfod.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace heapscope {

namespace {

using Clock = std::chrono::steady_clock;

std::string urls_from_environment() {
  const char* urls = std::getenv(DEBUGINFOD_URLS_ENV_VAR);
  return urls ? urls : "";
}

bool names_a_server(const std::string& urls) { return urls.find_first_not_of(" \t") != std::string::npos; }

// What the progress callback needs: libdebuginfod hands the client back, and the client our pointer.
struct Progress {
  const char* noun = "";
  std::string what;
  bool terminal = false;
  bool shown = false;
  Clock::time_point last_shown{};
};

std::string kib(long bytes) { return fmt::format("{} KiB", (bytes + 1023) / 1024); }

// A line on the terminal while bytes arrive, redrawn at most ten times a second; never on a pipe or a
// file, where it would only clutter a log.
int show_progress(debuginfod_client* client, long done, long total) {
  auto* progress = static_cast<Progress*>(debuginfod_get_user_data(client));
  if (!progress || !progress->terminal) return 0;
  const Clock::time_point now = Clock::now();
  if (progress->shown && now - progress->last_shown < std::chrono::milliseconds(100)) return 0;
  // The server that answered once one has; until then the ones being asked.
  const char* answered = debuginfod_get_url(client);
  const std::string from = answered ? answered : urls_from_environment();
  std::string line = fmt::format("\rheapscope: fetching the {} of {} from {}", progress->noun, progress->what, from);
  if (total > 0) line += fmt::format(": {} of {}", kib(std::max(done, 0L)), kib(total));
  std::fputs((line + "\033[K").c_str(), stderr);
  std::fflush(stderr);
  progress->shown = true;
  progress->last_shown = now;
  return 0;  // never cancel: DEBUGINFOD_TIMEOUT bounds a stalled transfer
}

class Client {
 public:
  DebuginfodFetch fetch(DebuginfodFile kind, const std::string& build_id, const std::string& what) {
    std::lock_guard lock(mutex_);
    DebuginfodFetch out;
    const std::string urls = urls_from_environment();
    if (!names_a_server(urls) || (unreachable_ && urls == unreachable_urls_)) return out;
    if (!client_ && !(client_ = debuginfod_begin())) {
      out.warning = "debuginfod: cannot start libdebuginfod's client; nothing is fetched by build-id";
      mark_unreachable(urls);
      return out;
    }
    Progress progress;
    progress.noun = kind == DebuginfodFile::debuginfo ? "debug info" : "file";
    progress.what = what;
    progress.terminal = ::isatty(STDERR_FILENO) == 1;
    debuginfod_set_user_data(client_, &progress);
    debuginfod_set_progressfn(client_, show_progress);
    char* path = nullptr;
    const auto* id = reinterpret_cast<const unsigned char*>(build_id.c_str());
    const int fd = kind == DebuginfodFile::debuginfo ? debuginfod_find_debuginfo(client_, id, 0, &path)
                                                     : debuginfod_find_executable(client_, id, 0, &path);
    debuginfod_set_user_data(client_, nullptr);
    if (progress.shown) std::fputs("\r\033[K", stderr);
    if (fd >= 0) {
      ::close(fd);
      if (path) out.path = path;
    } else if (fd != -ENOENT) {
      // Not "no such file" but no answer: the servers are down, unreachable or refused us. Asking again
      // for every module would only repeat the wait.
      out.warning = fmt::format(
          "debuginfod: the servers in DEBUGINFOD_URLS ({}) could not be asked for {} ({}); nothing more is "
          "fetched by build-id in this process (unset DEBUGINFOD_URLS or pass --no-debuginfod to skip them)",
          urls, what, std::strerror(-fd));
      mark_unreachable(urls);
    }
    std::free(path);
    return out;
  }

 private:
  void mark_unreachable(const std::string& urls) {
    unreachable_ = true;
    unreachable_urls_ = urls;
  }

  std::mutex mutex_;
  debuginfod_client* client_ = nullptr;  // kept for the process's life: it reuses its connections
  bool unreachable_ = false;
  std::string unreachable_urls_;
};

Client& client() {
  static Client* instance = new Client();  // never destroyed: a debugger may unload us late
  return *instance;
}

}  // namespace

bool debuginfod_configured() { return names_a_server(urls_from_environment()); }

DebuginfodFetch debuginfod_fetch(DebuginfodFile kind, const std::string& build_id, const std::string& what) {
  if (build_id.empty()) return {};
  return client().fetch(kind, build_id, what);
}

}  // namespace heapscope
