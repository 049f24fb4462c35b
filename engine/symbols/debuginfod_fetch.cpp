#include "symbols/debuginfod_fetch.h"

#include <dlfcn.h>
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
#include <type_traits>

#include "base/progress.h"

namespace heapscope {

namespace {

using Clock = std::chrono::steady_clock;

std::string urls_from_environment() {
  const char* urls = std::getenv(DEBUGINFOD_URLS_ENV_VAR);
  return urls ? urls : "";
}

bool names_a_server(const std::string& urls) { return urls.find_first_not_of(" \t") != std::string::npos; }

// libdebuginfod, loaded on the first fetch rather than linked: it brings libcurl, GnuTLS, Kerberos and
// LDAP with it, whose loading and start-up took 2.7 ms of every command's start (as long as `leaks` on a
// small core takes to walk a heap), while a fetch happens only when DEBUGINFOD_URLS names a server and a
// module's file or DWARF is missing. libdw loads it the same way.
struct Library {
  decltype(&debuginfod_begin) begin = nullptr;
  decltype(&debuginfod_set_user_data) set_user_data = nullptr;
  decltype(&debuginfod_get_user_data) get_user_data = nullptr;
  decltype(&debuginfod_set_progressfn) set_progressfn = nullptr;
  decltype(&debuginfod_get_url) get_url = nullptr;
  decltype(&debuginfod_find_debuginfo) find_debuginfo = nullptr;
  decltype(&debuginfod_find_executable) find_executable = nullptr;
  std::string error;  // why it could not be loaded; empty when it was
};

// Never unloaded, like the client it makes.
const Library& library() {
  static const Library loaded = [] {
    Library l;
    void* handle = ::dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      l.error = why ? why : "libdebuginfod.so.1 not found";
      return l;
    }
    auto bind = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
      if (!fn && l.error.empty()) l.error = fmt::format("libdebuginfod.so.1 has no {}", name);
    };
    bind(l.begin, "debuginfod_begin");
    bind(l.set_user_data, "debuginfod_set_user_data");
    bind(l.get_user_data, "debuginfod_get_user_data");
    bind(l.set_progressfn, "debuginfod_set_progressfn");
    bind(l.get_url, "debuginfod_get_url");
    bind(l.find_debuginfo, "debuginfod_find_debuginfo");
    bind(l.find_executable, "debuginfod_find_executable");
    return l;
  }();
  return loaded;
}

// What the progress callback needs: libdebuginfod hands the client back, and the client our pointer.
struct Download {
  const char* noun = "";
  std::string what;
  bool terminal = false;
  bool shown = false;
  bool cancelled = false;  // the user pressed Ctrl-C while it ran
  Clock::time_point last_shown{};
};

// Whether the computation this thread runs for was asked to stop (no Progress: nobody can ask). The
// check's Interrupted must not unwind through libdebuginfod and libcurl: it is thrown again once they
// have returned.
bool stop_requested() {
  Progress* progress = current_progress();
  if (!progress) return false;
  try {
    progress->check();
  } catch (const Interrupted&) {
    return true;
  }
  return false;
}

std::string kib(long bytes) { return fmt::format("{} KiB", (bytes + 1023) / 1024); }

// A line on the terminal while bytes arrive, redrawn at most ten times a second; never on a pipe or a
// file, where it would only clutter a log.
// Also where a download stops on Ctrl-C: libdebuginfod calls it about once a second even while a server
// sends nothing, and gives up when it returns non-zero. Without that, Ctrl-C would wait for
// DEBUGINFOD_TIMEOUT (90 s by default) with the "fetching" line on the screen.
int show_progress(debuginfod_client* client, long done, long total) {
  auto* progress = static_cast<Download*>(library().get_user_data(client));
  if (!progress) return 0;
  if (stop_requested()) {
    progress->cancelled = true;
    return 1;
  }
  if (!progress->terminal) return 0;
  const Clock::time_point now = Clock::now();
  if (progress->shown && now - progress->last_shown < std::chrono::milliseconds(100)) return 0;
  // The server that answered once one has; until then the ones being asked.
  const char* answered = library().get_url(client);
  const std::string from = answered ? answered : urls_from_environment();
  std::string line = fmt::format("\rheapscope: fetching the {} of {} from {}", progress->noun, progress->what, from);
  if (total > 0) line += fmt::format(": {} of {}", kib(std::max(done, 0L)), kib(total));
  std::fputs((line + "\033[K").c_str(), stderr);
  std::fflush(stderr);
  progress->shown = true;
  progress->last_shown = now;
  return 0;  // a stalled transfer is bounded by DEBUGINFOD_TIMEOUT, or ended by Ctrl-C
}

class Client {
 public:
  DebuginfodFetch fetch(DebuginfodFile kind, const std::string& build_id, const std::string& what) {
    std::lock_guard lock(mutex_);
    DebuginfodFetch out;
    const std::string urls = urls_from_environment();
    if (!names_a_server(urls) || (unreachable_ && urls == unreachable_urls_)) return out;
    const Library& lib = library();
    if (!lib.error.empty()) {
      out.warning = fmt::format("debuginfod: cannot load libdebuginfod ({}); nothing is fetched by build-id (install "
                                "libdebuginfod1)", lib.error);
      mark_unreachable(urls);
      return out;
    }
    if (!client_ && !(client_ = lib.begin())) {
      out.warning = "debuginfod: cannot start libdebuginfod's client; nothing is fetched by build-id";
      mark_unreachable(urls);
      return out;
    }
    Download progress;
    progress.noun = kind == DebuginfodFile::debuginfo ? "debug info" : "file";
    progress.what = what;
    progress.terminal = ::isatty(STDERR_FILENO) == 1;
    lib.set_user_data(client_, &progress);
    lib.set_progressfn(client_, show_progress);
    char* path = nullptr;
    const auto* id = reinterpret_cast<const unsigned char*>(build_id.c_str());
    const int fd = kind == DebuginfodFile::debuginfo ? lib.find_debuginfo(client_, id, 0, &path)
                                                     : lib.find_executable(client_, id, 0, &path);
    lib.set_user_data(client_, nullptr);
    if (progress.shown) std::fputs("\r\033[K", stderr);
    if (progress.cancelled) {
      if (fd >= 0) ::close(fd);
      std::free(path);
      throw Interrupted();
    }
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
