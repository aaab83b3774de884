// Finding Python and a script of this project for plot and export (tools/python_script.h).

#include "tools/python_script.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "parallel/launch/subprocess.h"

extern char** environ;

namespace minitrain::cli {
namespace {

namespace fs = std::filesystem;

// posix_spawnp with `actions`, then waitpid; the exit status as run_and_wait returns it.
int spawn_and_wait(const std::vector<std::string>& args,
                   const posix_spawn_file_actions_t* actions) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], actions, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Whether `python -c "import <module>"` succeeds (quietly).
bool can_import(const std::string& python, const std::string& module) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const int rc = spawn_and_wait({python, "-c", "import " + module}, &actions);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0;
}

}  // namespace

std::string find_python(const std::string& module) {
  if (const char* p = std::getenv("MINITRAIN_PYTHON"); p != nullptr && *p != '\0') return p;
  for (const char* p : {"python3", "/usr/bin/python3"})
    if (can_import(p, module)) return p;
  return "";
}

std::string find_script(const char* env_var, const std::string& file) {
  if (const char* p = std::getenv(env_var); p != nullptr && *p != '\0') return p;
  std::error_code ec;
  const fs::path exe_dir = fs::path(self_executable()).parent_path();
  for (const fs::path& p : {exe_dir / ".." / "share" / "minitrain" / file,
                            fs::path(MINITRAIN_SOURCE_DIR) / "scripts" / file})
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  return "";
}

int run_and_wait(const std::vector<std::string>& argv) {
  std::cout.flush();
  std::cerr.flush();
  return spawn_and_wait(argv, nullptr);
}

std::string python_failure(const std::string& python, const std::string& script, int rc) {
  const char* env = std::getenv("MINITRAIN_PYTHON");
  const bool from_env = env != nullptr && python == env;
  std::string what = "the Python interpreter " + python + (from_env ? " ($MINITRAIN_PYTHON)" : "") +
                     " running " + script;
  if (rc < 0) return what + " could not be started";
  what += rc > 128 ? " ended with exit status " + std::to_string(rc) + " (signal " +
                         std::to_string(rc - 128) + ")"
                   : " ended with exit status " + std::to_string(rc);
  if (from_env) what += "; $MINITRAIN_PYTHON must name a Python 3 (unset it to look for python3)";
  return what;
}

}  // namespace minitrain::cli
