// detect_process_env: each launcher's variables, their precedence, and malformed or inconsistent
// values; rank_device; and init_process_group's refusals that need no second process.

#include "parallel/launch/process_env.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "parallel/comm/nccl_communicator.h"
#include "parallel/launch/process_group.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::minitrain::testing::error_message;
using Vars = std::map<std::string, std::string>;

ProcessEnv detect(const Vars& vars) {
  return detect_process_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string detect_error(const Vars& vars) {
  return error_message([&] { detect(vars); });
}

TEST(ProcessEnv, NoLauncherIsASingleProcess) {
  const ProcessEnv e = detect({{"HOME", "/root"}});
  EXPECT_EQ(e.source, "none");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 1);
  EXPECT_FALSE(e.under_mpi());
  EXPECT_EQ(e.job_id, "");
}

TEST(ProcessEnv, ReadsTorchrunVariables) {
  const ProcessEnv e = detect({{"RANK", "5"},
                               {"WORLD_SIZE", "8"},
                               {"LOCAL_RANK", "1"},
                               {"LOCAL_WORLD_SIZE", "4"},
                               {"MASTER_ADDR", "node0.cluster"},
                               {"MASTER_PORT", "29500"},
                               {"TORCHELASTIC_RUN_ID", "run-7"}});
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.master_addr, "node0.cluster");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(e.job_id, "run-7");
  // Without the local variables: one node, every rank local.
  const ProcessEnv one_node = detect({{"RANK", "2"}, {"WORLD_SIZE", "3"}});
  EXPECT_EQ(one_node.local_rank, 2);
  EXPECT_EQ(one_node.local_world_size, 3);
  EXPECT_EQ(one_node.master_port, 0);
}

TEST(ProcessEnv, JobIdPrefersMinitrainThenTorchelasticThenSlurm) {
  Vars v{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_JOB_ID", "991"}};
  EXPECT_EQ(detect(v).job_id, "991");
  v["TORCHELASTIC_RUN_ID"] = "te";
  EXPECT_EQ(detect(v).job_id, "te");
  v["MINITRAIN_JOB_ID"] = "mt-1";
  EXPECT_EQ(detect(v).job_id, "mt-1");
}

TEST(ProcessEnv, ReadsOpenMpiAndPmiVariables) {
  const ProcessEnv e = detect({{"OMPI_COMM_WORLD_RANK", "3"},
                               {"OMPI_COMM_WORLD_SIZE", "6"},
                               {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}});
  EXPECT_EQ(e.source, "mpi");
  EXPECT_TRUE(e.under_mpi());
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 6);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 3);
  const ProcessEnv pmi = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  EXPECT_EQ(pmi.source, "mpi");
  EXPECT_EQ(pmi.rank, 1);
  EXPECT_EQ(pmi.world_size, 2);
}

TEST(ProcessEnv, ReadsSlurmVariables) {
  const ProcessEnv e = detect({{"SLURM_PROCID", "5"},
                               {"SLURM_NTASKS", "7"},
                               {"SLURM_LOCALID", "0"},
                               {"SLURM_NODEID", "3"},
                               {"SLURM_TASKS_PER_NODE", "2(x3),1"},
                               {"SLURM_JOB_ID", "4242"}});
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 7);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 1);  // node 3 is the fourth node: the "1"
  EXPECT_EQ(e.job_id, "4242");
  const ProcessEnv per_node = detect({{"SLURM_PROCID", "3"},
                                      {"SLURM_NTASKS", "4"},
                                      {"SLURM_LOCALID", "1"},
                                      {"SLURM_NTASKS_PER_NODE", "2"}});
  EXPECT_EQ(per_node.local_world_size, 2);
  EXPECT_NE(detect_error({{"SLURM_PROCID", "0"},
                          {"SLURM_NTASKS", "4"},
                          {"SLURM_NODEID", "2"},
                          {"SLURM_TASKS_PER_NODE", "2(x2)"}})
                .find("SLURM_TASKS_PER_NODE='2(x2)' lists 2 node(s) but SLURM_NODEID is 2"),
            std::string::npos);
}

TEST(ProcessEnv, TorchrunComesBeforeMpiAndMpiBeforeSlurm) {
  Vars v{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}};
  EXPECT_EQ(detect(v).source, "slurm");
  v["OMPI_COMM_WORLD_RANK"] = "0";
  v["OMPI_COMM_WORLD_SIZE"] = "3";
  EXPECT_EQ(detect(v).source, "mpi");
  EXPECT_EQ(detect(v).world_size, 3);
  v["RANK"] = "1";
  v["WORLD_SIZE"] = "4";
  EXPECT_EQ(detect(v).source, "torchrun");
  EXPECT_EQ(detect(v).world_size, 4);
}

TEST(ProcessEnv, NamesMalformedValues) {
  EXPECT_THROW(detect({{"RANK", "one"}, {"WORLD_SIZE", "2"}}), ValueError);
  EXPECT_NE(detect_error({{"RANK", "one"}, {"WORLD_SIZE", "2"}})
                .find("RANK='one' is not a non-negative integer"),
            std::string::npos);
  for (const char* bad : {"", "-1", "2.0", " 2", "2 ", "0x2", "99999999999"})
    EXPECT_NE(detect_error({{"RANK", "0"}, {"WORLD_SIZE", bad}})
                  .find(std::string("WORLD_SIZE='") + bad + "'"),
              std::string::npos)
        << "'" << bad << "'";
  EXPECT_NE(detect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "x"}})
                .find("LOCAL_RANK='x'"),
            std::string::npos);
  EXPECT_NE(detect_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "two"}})
                .find("OMPI_COMM_WORLD_SIZE='two'"),
            std::string::npos);
  EXPECT_NE(detect_error({{"SLURM_PROCID", "a"}, {"SLURM_NTASKS", "2"}}).find("SLURM_PROCID='a'"),
            std::string::npos);
  EXPECT_NE(detect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT='70000' is not a TCP port"),
            std::string::npos);
  EXPECT_NE(detect_error({{"MASTER_PORT", "http"}}).find("MASTER_PORT='http'"), std::string::npos);
}

TEST(ProcessEnv, NamesInconsistentValues) {
  EXPECT_NE(detect_error({{"RANK", "4"}, {"WORLD_SIZE", "4"}})
                .find("RANK=4 is not a rank of a job of WORLD_SIZE=4"),
            std::string::npos);
  EXPECT_NE(
      detect_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0 must be at least 1"),
      std::string::npos);
  EXPECT_NE(detect_error({{"RANK", "1"}}).find("RANK is set but WORLD_SIZE is not"),
            std::string::npos);
  EXPECT_NE(detect_error({{"WORLD_SIZE", "2"}}).find("WORLD_SIZE is set but RANK is not"),
            std::string::npos);
  EXPECT_NE(
      detect_error(
          {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}})
          .find("LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"),
      std::string::npos);
  EXPECT_NE(detect_error({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}})
                .find("LOCAL_WORLD_SIZE=3 must be between 1 and WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(detect_error({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}})
                .find("OMPI_COMM_WORLD_RANK=2 is not a rank of a job of OMPI_COMM_WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(detect_error({{"SLURM_PROCID", "0"}}).find("SLURM_NTASKS is not"), std::string::npos);
}

TEST(RankDevice, KeepsTheCpuAndExplicitGpus) {
  ProcessEnv e;
  e.rank = 3;
  e.world_size = 4;
  e.local_rank = 3;
  e.local_world_size = 4;
  EXPECT_EQ(rank_device(Device::cpu(), e), Device::cpu());
  EXPECT_EQ(rank_device(Device::cuda(2), e), Device::cuda(2));
}

TEST(RankDevice, GpuRequestBecomesTheLocalRanksGpuOrADeviceError) {
  ProcessEnv e;
  e.rank = 5;
  e.world_size = 8;
  e.local_rank = 1;
  e.local_world_size = 4;
  const int gpus = cuda_device_count();
  if (gpus > e.local_rank) {
    EXPECT_EQ(rank_device(Device::cuda(), e), Device::cuda(1));
  } else {
    EXPECT_THROW(rank_device(Device::cuda(), e), DeviceError);
    const std::string msg = error_message([&] { rank_device(Device::cuda(), e); });
    if (gpus > 0)
      EXPECT_NE(msg.find("LOCAL_RANK=1 asks for cuda:1 but this machine has 1 GPU(s)"),
                std::string::npos)
          << msg;
    else
      EXPECT_NE(msg.find("cuda:1"), std::string::npos) << msg;
  }
  e.local_rank = 1000;  // never a GPU of this machine
  EXPECT_THROW(rank_device(Device::cuda(), e), DeviceError);
}

TEST(InitProcessGroup, CpuRanksWithoutMpirunAreAValueErrorThatSaysUseMpirun) {
  const ProcessEnv e = detect(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  ProcessGroupOptions o;
  o.backend = "mpi";
  EXPECT_THROW(init_process_group(e, Device::cpu(), o), ValueError);
  const std::string msg = error_message([&] { init_process_group(e, Device::cpu(), o); });
  EXPECT_NE(msg.find("rank 1 of WORLD_SIZE=2 (from torchrun variables)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run `mpirun -n 2 <command>` for CPU ranks"), std::string::npos) << msg;
  // "auto" on the CPU is the same backend and the same refusal.
  EXPECT_NE(error_message([&] { init_process_group(e, Device::cpu()); }).find("mpirun -n 2"),
            std::string::npos);
}

TEST(InitProcessGroup, RejectsUnknownAndMismatchedBackends) {
  const ProcessEnv single;
  ProcessGroupOptions o;
  o.backend = "gloo";
  EXPECT_NE(error_message([&] {
              init_process_group(single, Device::cpu(), o);
            }).find("unknown backend 'gloo' (expected auto, mpi or nccl)"),
            std::string::npos);
  o.backend = "nccl";
  EXPECT_THROW(init_process_group(single, Device::cpu(), o), ValueError);
  EXPECT_NE(
      error_message([&] { init_process_group(single, Device::cpu(), o); }).find("device is cpu"),
      std::string::npos);
  EXPECT_NE(error_message([&] {
              init_process_group(single, Device::cpu(), o);
            }).find("--backend mpi (or auto) under mpirun for CPU ranks"),
            std::string::npos);
  // mpi with a GPU is no mismatch (CUDA tensors are staged through pinned host memory): here the
  // only error is that this program did not link the MPI library.
  o.backend = "mpi";
  EXPECT_NE(
      error_message([&] { init_process_group(single, Device::cuda(0), o); }).find("needs MPI"),
      std::string::npos);
}

// This program links minitrain_parallel without minitrain_mpi (Note [MPI as an opt-in library]):
// asking for MPI says what to link and call, instead of failing to link or crashing.
TEST(InitProcessGroup, MpiInAProgramWithoutTheMpiLibrarySaysWhatToLink) {
  const ProcessEnv single;  // one rank, no launcher: the mpi backend would be a world of one
  ProcessGroupOptions o;
  o.backend = "mpi";
  EXPECT_THROW(init_process_group(single, Device::cpu(), o), ValueError);
  const std::string msg = error_message([&] { init_process_group(single, Device::cpu(), o); });
  EXPECT_NE(msg.find("init_process_group's mpi backend needs MPI"), std::string::npos) << msg;
  EXPECT_NE(msg.find("link minitrain::mpi"), std::string::npos) << msg;
  EXPECT_NE(msg.find("minitrain::use_mpi_backend()"), std::string::npos) << msg;
}

TEST(InitProcessGroup, NcclInACpuOnlyBuildIsADeviceError) {
  if (cuda_compiled()) GTEST_SKIP() << "a CUDA build: the nccl backend exists here";
  ProcessGroupOptions o;
  o.backend = "nccl";
  EXPECT_THROW(init_process_group(ProcessEnv{}, Device::cuda(0), o), DeviceError);
  EXPECT_NE(error_message([&] {
              init_process_group(ProcessEnv{}, Device::cuda(0), o);
            }).find("CPU-only build"),
            std::string::npos);
  EXPECT_THROW(nccl_unique_id(), DeviceError);
}

}  // namespace
}  // namespace minitrain
