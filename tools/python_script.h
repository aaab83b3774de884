#pragma once
// The commands that hand their work to a Python script (plot: matplotlib; export --format onnx:
// the onnx package) find the interpreter and the script the same way.

#include <string>
#include <vector>

namespace minitrain::cli {

/// $MINITRAIN_PYTHON when set (taken as it is), else the first of python3 (PATH) and
/// /usr/bin/python3 (Debian's, where python3-* packages install) that can `import <module>`; ""
/// when none can.
std::string find_python(const std::string& module);

/// $<env_var> when set, else share/minitrain/<file> beside an installed command, else this source
/// tree's scripts/<file> (a build tree's command); "" when none exists.
std::string find_script(const char* env_var, const std::string& file);

/// Runs argv (argv[0] looked up in PATH) with this process's stdout and stderr, and waits.
/// Returns its exit status, 128 + the signal that ended it, or -1 when it could not start.
int run_and_wait(const std::vector<std::string>& argv);

/// What went wrong when run_and_wait({python, script, ...}) returned `rc` != 0, naming the
/// interpreter and where it came from: "the Python interpreter /bin/false ($MINITRAIN_PYTHON)
/// running plot_metrics.py ended with exit status 1" (or "could not be started").
std::string python_failure(const std::string& python, const std::string& script, int rc);

}  // namespace minitrain::cli
