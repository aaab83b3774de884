// The rank of this process, read strictly from the launcher's variables: a typo in RANK or a
// WORLD_SIZE that contradicts RANK must stop the job at start-up, not hang it at the first
// collective while the other ranks wait for a rank that believes it is someone else.

#include "parallel/launch/process_env.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/strings.h"

namespace minitrain {
namespace {

using Getter = std::function<const char*(const char*)>;

bool is_set(const Getter& get, const char* name) { return get(name) != nullptr; }

// A non-negative integer, digits only (no sign, no spaces, no "4.0"): the launchers never write
// more.
int parse_count(const char* name, const char* text) {
  const std::string s = text;
  bool digits = !s.empty() && s.size() <= 9;
  for (char c : s) digits = digits && c >= '0' && c <= '9';
  MT_CHECK_AS(ValueError, digits, "process environment: ", name, "='", s,
              "' is not a non-negative integer; fix or unset ", name);
  return std::atoi(s.c_str());
}

int get_count(const Getter& get, const char* name, int fallback) {
  const char* text = get(name);
  return text ? parse_count(name, text) : fallback;
}

std::string get_string(const Getter& get, const char* name) {
  const char* text = get(name);
  return text ? std::string(text) : std::string();
}

// The first variable of `names` that is set, or "".
std::string first_set(const Getter& get, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = get(n); v != nullptr && *v != '\0') return v;
  return "";
}

void read_master(const Getter& get, ProcessEnv& env) {
  env.master_addr = get_string(get, "MASTER_ADDR");
  if (const char* port = get("MASTER_PORT")) {
    const int p = parse_count("MASTER_PORT", port);
    MT_CHECK_AS(ValueError, p >= 1 && p <= 65535, "process environment: MASTER_PORT='", port,
                "' is not a TCP port (1 to 65535)");
    env.master_port = p;
  }
}

// Slurm's SLURM_TASKS_PER_NODE: "2(x3),1" = nodes 0-2 run 2 tasks each, node 3 runs 1.
int slurm_tasks_on_node(const std::string& spec, int node) {
  int index = 0;
  for (const std::string& item : split(spec, ',')) {
    const size_t paren = item.find("(x");
    const std::string count_text = item.substr(0, paren);
    int repeat = 1;
    if (paren != std::string::npos) {
      MT_CHECK_AS(ValueError, item.size() > paren + 3 && item.back() == ')',
                  "process environment: SLURM_TASKS_PER_NODE='", spec,
                  "' is malformed (expected a list like 2(x3),1)");
      repeat = parse_count("SLURM_TASKS_PER_NODE",
                           item.substr(paren + 2, item.size() - paren - 3).c_str());
    }
    const int count = parse_count("SLURM_TASKS_PER_NODE", count_text.c_str());
    if (node < index + repeat) return count;
    index += repeat;
  }
  MT_THROW(ValueError, "process environment: SLURM_TASKS_PER_NODE='", spec, "' lists ", index,
           " node(s) but SLURM_NODEID is ", node);
}

// The rules every source must satisfy, named by that source's variables.
void check_consistent(const ProcessEnv& e, const char* rank_var, const char* size_var,
                      const char* local_rank_var, const char* local_size_var) {
  MT_CHECK_AS(ValueError, e.world_size >= 1, "process environment: ", size_var, "=", e.world_size,
              " must be at least 1");
  MT_CHECK_AS(ValueError, e.rank < e.world_size, "process environment: ", rank_var, "=", e.rank,
              " is not a rank of a job of ", size_var, "=", e.world_size, " (ranks are 0 to ",
              e.world_size - 1, ")");
  MT_CHECK_AS(ValueError, e.local_world_size >= 1 && e.local_world_size <= e.world_size,
              "process environment: ", local_size_var, "=", e.local_world_size,
              " must be between 1 and ", size_var, "=", e.world_size);
  MT_CHECK_AS(ValueError, e.local_rank < e.local_world_size,
              "process environment: ", local_rank_var, "=", e.local_rank, " is not below ",
              local_size_var, "=", e.local_world_size);
}

ProcessEnv from_torchrun(const Getter& get) {
  MT_CHECK_AS(ValueError, is_set(get, "RANK") && is_set(get, "WORLD_SIZE"),
              "process environment: ", is_set(get, "RANK") ? "RANK" : "WORLD_SIZE", " is set but ",
              is_set(get, "RANK") ? "WORLD_SIZE" : "RANK",
              " is not; a torchrun-style launch sets both (minitrain launch does)");
  ProcessEnv e;
  e.source = "torchrun";
  e.rank = parse_count("RANK", get("RANK"));
  e.world_size = parse_count("WORLD_SIZE", get("WORLD_SIZE"));
  // Without the local variables, assume one node: every rank is local.
  e.local_rank = get_count(get, "LOCAL_RANK", e.rank);
  e.local_world_size = get_count(get, "LOCAL_WORLD_SIZE", e.world_size);
  read_master(get, e);
  e.job_id = first_set(get, {"MINITRAIN_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"});
  check_consistent(e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  return e;
}

ProcessEnv from_mpi(const Getter& get) {
  ProcessEnv e;
  e.source = "mpi";
  const bool ompi = is_set(get, "OMPI_COMM_WORLD_RANK");
  const char* rank_var = ompi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK";
  const char* size_var = ompi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE";
  const char* local_rank_var = ompi ? "OMPI_COMM_WORLD_LOCAL_RANK" : "MPI_LOCALRANKID";
  const char* local_size_var = ompi ? "OMPI_COMM_WORLD_LOCAL_SIZE" : "MPI_LOCALNRANKS";
  MT_CHECK_AS(ValueError, is_set(get, size_var), "process environment: ", rank_var, " is set but ",
              size_var, " is not; start the job with mpirun");
  e.rank = parse_count(rank_var, get(rank_var));
  e.world_size = parse_count(size_var, get(size_var));
  e.local_rank = get_count(get, local_rank_var, e.rank);
  e.local_world_size = get_count(get, local_size_var, e.world_size);
  read_master(get, e);
  e.job_id = first_set(get, {"MINITRAIN_JOB_ID", "SLURM_JOB_ID", "PMIX_NAMESPACE"});
  check_consistent(e, rank_var, size_var, local_rank_var, local_size_var);
  return e;
}

ProcessEnv from_slurm(const Getter& get) {
  ProcessEnv e;
  e.source = "slurm";
  const char* size_var = is_set(get, "SLURM_NTASKS") ? "SLURM_NTASKS" : "SLURM_NPROCS";
  MT_CHECK_AS(
      ValueError, is_set(get, size_var),
      "process environment: SLURM_PROCID is set but SLURM_NTASKS is not; start the job with srun");
  e.rank = parse_count("SLURM_PROCID", get("SLURM_PROCID"));
  e.world_size = parse_count(size_var, get(size_var));
  e.local_rank = get_count(get, "SLURM_LOCALID", 0);
  const char* local_size_var = "SLURM_NTASKS_PER_NODE";
  if (is_set(get, "SLURM_NTASKS_PER_NODE")) {
    e.local_world_size = parse_count("SLURM_NTASKS_PER_NODE", get("SLURM_NTASKS_PER_NODE"));
  } else if (is_set(get, "SLURM_TASKS_PER_NODE")) {
    local_size_var = "SLURM_TASKS_PER_NODE";
    e.local_world_size =
        slurm_tasks_on_node(get("SLURM_TASKS_PER_NODE"), get_count(get, "SLURM_NODEID", 0));
  } else {
    e.local_world_size = e.world_size;  // nothing says otherwise: one node
  }
  read_master(get, e);
  e.job_id = first_set(get, {"MINITRAIN_JOB_ID", "SLURM_JOB_ID"});
  check_consistent(e, "SLURM_PROCID", size_var, "SLURM_LOCALID", local_size_var);
  return e;
}

}  // namespace

ProcessEnv detect_process_env(const std::function<const char*(const char*)>& get) {
  if (is_set(get, "RANK") || is_set(get, "WORLD_SIZE")) return from_torchrun(get);
  if (is_set(get, "OMPI_COMM_WORLD_RANK") || is_set(get, "PMI_RANK")) return from_mpi(get);
  if (is_set(get, "SLURM_PROCID")) return from_slurm(get);
  ProcessEnv e;
  e.source = "none";
  read_master(get, e);
  e.job_id = first_set(get, {"MINITRAIN_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"});
  return e;
}

ProcessEnv detect_process_env() {
  return detect_process_env([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace minitrain
