// Tests for launch_env.h: torchrun's, Open MPI's and Slurm's variables, their precedence, and a
// clear error naming each missing or inconsistent variable.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "tensorplay/distributed/launch_env.h"

namespace dist = tensorplay::distributed;

namespace {

dist::LaunchEnv read(const std::map<std::string, std::string>& vars) {
  return dist::read_launch_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

}  // namespace

TEST_CASE("no launcher variables mean the embedded group of one", "[launch_env]") {
  dist::LaunchEnv env = read({});
  CHECK_FALSE(env.launched);
  CHECK(env.source == "none");
  CHECK(env.rank == 0);
  CHECK(env.world_size == 1);
}

TEST_CASE("torchrun's variables", "[launch_env]") {
  dist::LaunchEnv env = read({{"RANK", "3"},
                              {"WORLD_SIZE", "8"},
                              {"LOCAL_RANK", "1"},
                              {"LOCAL_WORLD_SIZE", "2"},
                              {"MASTER_ADDR", "10.0.0.5"},
                              {"MASTER_PORT", "29400"}});
  CHECK(env.launched);
  CHECK(env.source == "torchrun");
  CHECK(env.rank == 3);
  CHECK(env.world_size == 8);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 2);
  CHECK(env.master_addr == "10.0.0.5");
  CHECK(env.master_port == 29400);
}

TEST_CASE("missing or inconsistent torchrun variables name the variable", "[launch_env]") {
  CHECK_THROWS_WITH(read({{"RANK", "0"}}), Catch::Contains("WORLD_SIZE is not set"));
  CHECK_THROWS_WITH(read({{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}),
                    Catch::Contains("RANK is not set"));
  CHECK_THROWS_WITH(
      read({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}}),
      Catch::Contains("RANK=2 must be less than WORLD_SIZE=2"));
  CHECK_THROWS_WITH(read({{"RANK", "x"}, {"WORLD_SIZE", "2"}}),
                    Catch::Contains("RANK='x' is not a whole number"));
  CHECK_THROWS_WITH(read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}),
                    Catch::Contains("MASTER_ADDR is not set"));
  CHECK_THROWS_WITH(read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}),
                    Catch::Contains("MASTER_PORT is not set"));
  CHECK_THROWS_WITH(
      read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
      Catch::Contains("MASTER_PORT=70000 is out of range"));
  CHECK_THROWS_WITH(read({{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
                    Catch::Contains("WORLD_SIZE=0 is out of range"));
  CHECK_THROWS_WITH(read({{"RANK", "1"},
                          {"WORLD_SIZE", "4"},
                          {"LOCAL_RANK", "2"},
                          {"LOCAL_WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "h"},
                          {"MASTER_PORT", "1"}}),
                    Catch::Contains("LOCAL_RANK=2 must be less than LOCAL_WORLD_SIZE=2"));
}

TEST_CASE("Open MPI's variables", "[launch_env]") {
  dist::LaunchEnv env = read({{"OMPI_COMM_WORLD_RANK", "1"},
                              {"OMPI_COMM_WORLD_SIZE", "2"},
                              {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                              {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  CHECK(env.source == "openmpi");
  CHECK(env.rank == 1);
  CHECK(env.world_size == 2);
  CHECK(env.master_addr == "127.0.0.1");  // one host: loopback
  CHECK(env.master_port == 29500);
  // Several hosts need MASTER_ADDR.
  CHECK_THROWS_WITH(read({{"OMPI_COMM_WORLD_RANK", "0"},
                          {"OMPI_COMM_WORLD_SIZE", "4"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
                    Catch::Contains("MASTER_ADDR is not set"));
}

TEST_CASE("Slurm's variables and the first host of the node list", "[launch_env]") {
  dist::LaunchEnv env = read({{"SLURM_PROCID", "5"},
                              {"SLURM_NTASKS", "8"},
                              {"SLURM_LOCALID", "1"},
                              {"SLURM_NTASKS_PER_NODE", "4(x2)"},
                              {"SLURM_JOB_NODELIST", "gpu[07-08],cpu1"}});
  CHECK(env.source == "slurm");
  CHECK(env.rank == 5);
  CHECK(env.world_size == 8);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 4);
  CHECK(env.master_addr == "gpu07");
  CHECK(env.listen_addr == "0.0.0.0");  // the name may resolve to 127.0.1.1 on gpu07 itself
  CHECK(dist::first_slurm_host("node[3,5-9]") == "node3");
  CHECK(dist::first_slurm_host("a,b") == "a");
  CHECK(dist::first_slurm_host("rack[1-2]-n[4-5]") == "rack1-n[4-5]");
  CHECK_THROWS_WITH(dist::first_slurm_host("n[1-2"), Catch::Contains("unclosed"));
  CHECK_THROWS_WITH(
      read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}}),
      Catch::Contains("SLURM_JOB_NODELIST is not set"));
}

TEST_CASE("torchrun's variables win over Slurm's", "[launch_env]") {
  dist::LaunchEnv env = read({{"RANK", "1"},
                              {"WORLD_SIZE", "2"},
                              {"MASTER_ADDR", "127.0.0.1"},
                              {"MASTER_PORT", "1234"},
                              {"SLURM_PROCID", "0"},
                              {"SLURM_NTASKS", "1"}});
  CHECK(env.source == "torchrun");
  CHECK(env.rank == 1);
}

TEST_CASE("the job id message logs record: torchrun's run id, else Slurm's job step",
          "[launch_env]") {
  const std::map<std::string, std::string> torchrun = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.5"}, {"MASTER_PORT", "29400"}};
  CHECK(read(torchrun).job_id.empty());
  CHECK(read(torchrun).restart_count == 0);
  auto with = [&](std::map<std::string, std::string> vars,
                  const std::map<std::string, std::string>& more) {
    vars.insert(more.begin(), more.end());
    return read(vars);
  };
  dist::LaunchEnv env =
      with(torchrun, {{"TORCHELASTIC_RUN_ID", "job-7"}, {"TORCHELASTIC_RESTART_COUNT", "2"}});
  CHECK(env.job_id == "job-7");
  CHECK(env.restart_count == 2);
  // torchrun's default when given no --rdzv-id is the same for every job: no id at all.
  CHECK(with(torchrun, {{"TORCHELASTIC_RUN_ID", "none"}}).job_id.empty());
  CHECK_THROWS_WITH(with(torchrun, {{"TORCHELASTIC_RESTART_COUNT", "x"}}),
                    Catch::Contains("TORCHELASTIC_RESTART_COUNT='x' is not a whole number"));
  dist::LaunchEnv slurm = read({{"SLURM_PROCID", "0"},
                                {"SLURM_NTASKS", "2"},
                                {"SLURM_JOB_NODELIST", "node1"},
                                {"SLURM_JOB_ID", "4242"},
                                {"SLURM_STEP_ID", "3"}});
  CHECK(slurm.job_id == "slurm-4242.3");
}

TEST_CASE("TENSORPLAY_RDZV_TIMEOUT is a number of seconds, read strictly", "[launch_env]") {
  using std::chrono::milliseconds;
  const std::map<std::string, std::string> job = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}};
  auto with = [&](const std::string& value, const char* name = "TENSORPLAY_RDZV_TIMEOUT") {
    auto vars = job;
    vars[name] = value;
    return read(vars);
  };
  CHECK_FALSE(read(job).rdzv_timeout.has_value());
  CHECK_FALSE(with("").rdzv_timeout.has_value());  // set but empty: as unset
  CHECK(with("2").rdzv_timeout == milliseconds(2000));
  CHECK(with("900").rdzv_timeout == milliseconds(900000));
  CHECK(with("2.5").rdzv_timeout == milliseconds(2500));
  CHECK(with("0.1").rdzv_timeout == milliseconds(100));
  CHECK(with("86400").rdzv_timeout == milliseconds(86400000));
  // The old name still works (with a warning on standard error).
  CHECK(with("3", "TP_RDZV_TIMEOUT").rdzv_timeout == milliseconds(3000));
  // Read without launcher variables too (a group of one ignores it, but a bad value is an error).
  CHECK(read({{"TENSORPLAY_RDZV_TIMEOUT", "3"}}).rdzv_timeout == milliseconds(3000));
  for (const char* bad : {"abc", "2s", " 2", "2 ", "0x10", "inf", "nan", "1,5", "--2", "0", "-1",
                          "0.05", "86401", "1e9"}) {
    INFO("TENSORPLAY_RDZV_TIMEOUT=" << bad);
    CHECK_THROWS_WITH(with(bad), Catch::Contains("TENSORPLAY_RDZV_TIMEOUT=" + std::string(bad) +
                                                 ": expected a number from 0.1 to 86400") &&
                                     Catch::Contains("e.g. TENSORPLAY_RDZV_TIMEOUT=900"));
  }
}

TEST_CASE("TENSORPLAY_CLUSTER_TOKEN is read with the launcher's variables", "[launch_env]") {
  CHECK(read({}).cluster_token.empty());
  CHECK(read({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TENSORPLAY_CLUSTER_TOKEN", "s3cret"}})
            .cluster_token == "s3cret");
  CHECK(read({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TP_CLUSTER_TOKEN", "old"}}).cluster_token ==
        "old");
}

TEST_CASE("a loopback job's environment and a free loopback port", "[launch_env]") {
  const tensorplay::distributed::LaunchEnv env =
      tensorplay::distributed::loopback_launch_env(1, 3, 40123);
  CHECK(env.launched);
  CHECK(env.rank == 1);
  CHECK(env.world_size == 3);
  CHECK(env.master_addr == "127.0.0.1");
  CHECK(env.master_port == 40123);
  const int port = tensorplay::distributed::free_loopback_port();
  CHECK(port > 0);
  CHECK(port < 65536);
}

namespace {

/// srun's variables for task `rank` of `ntasks` (job 77, step 0) on node `node` of "2(x2)".
std::map<std::string, std::string> srun_task(int rank, int node = 0,
                                             const std::string& per_node = "2(x2)") {
  return {{"SLURM_JOB_ID", "77"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", "4"},
          {"SLURM_LOCALID", std::to_string(rank % 2)},
          {"SLURM_NODEID", std::to_string(node)},
          {"SLURM_TASKS_PER_NODE", per_node},
          {"SLURM_JOB_NODELIST", "node[1-2]"}};
}

}  // namespace

TEST_CASE("a job identity from every launcher, and a port derived from it", "[launch_env]") {
  // Finding 1: two jobs on one node met on port 29500.
  dist::LaunchEnv slurm = read(srun_task(0));
  CHECK(slurm.job_id == "slurm-77.0");
  CHECK(slurm.port_derived);
  CHECK(slurm.master_port == dist::derived_port("slurm-77.0"));
  auto other_step = srun_task(0);
  other_step["SLURM_STEP_ID"] = "1";
  CHECK(read(other_step).job_id == "slurm-77.1");
  CHECK(read(other_step).master_port != slurm.master_port);
  dist::LaunchEnv ompi = read({{"OMPI_COMM_WORLD_RANK", "0"},
                               {"OMPI_COMM_WORLD_SIZE", "2"},
                               {"OMPI_MCA_ess_base_jobid", "669712385"},
                               {"PMIX_NAMESPACE", "669712385"}});
  CHECK(ompi.job_id == "openmpi-669712385");
  CHECK(ompi.master_port == dist::derived_port("openmpi-669712385"));
  CHECK(read({{"OMPI_COMM_WORLD_RANK", "0"},
              {"OMPI_COMM_WORLD_SIZE", "2"},
              {"PMIX_NAMESPACE", "prterun-x-1@1"}})
            .job_id == "pmix-prterun-x-1@1");
  // MPICH on one host: its process manager (this process's parent) is one per job.
  dist::LaunchEnv mpich = read({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}});
  CHECK_THAT(mpich.job_id,
             Catch::StartsWith("mpich-") && Catch::EndsWith("-" + std::to_string(::getppid())));
  // MASTER_PORT still wins; no job id keeps torchrun's default.
  auto fixed = srun_task(0);
  fixed["MASTER_PORT"] = "31000";
  CHECK(read(fixed).master_port == 31000);
  CHECK_FALSE(read(fixed).port_derived);
  CHECK(dist::derived_port("") == 29500);
  for (const char* id : {"slurm-1.0", "slurm-2.0", "openmpi-3", "a"}) {
    CHECK(dist::derived_port(id) >= 20000);
    CHECK(dist::derived_port(id) < 30000);
  }
}

TEST_CASE("MPICH's, Intel MPI's and PMIx's variables", "[launch_env]") {
  // Finding 4: under MPICH's mpirun each process trained alone.
  dist::LaunchEnv env = read({{"PMI_RANK", "3"},
                              {"PMI_SIZE", "4"},
                              {"MPI_LOCALRANKID", "1"},
                              {"MPI_LOCALNRANKS", "2"},
                              {"MASTER_ADDR", "10.0.0.1"}});
  CHECK(env.launched);
  CHECK(env.source == "mpich");
  CHECK(env.rank == 3);
  CHECK(env.world_size == 4);
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 2);
  CHECK(env.master_addr == "10.0.0.1");
  CHECK_THROWS_WITH(
      read({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}, {"MPI_LOCALNRANKS", "2"}}),
      Catch::Contains("mpich job spans several hosts") && Catch::Contains("set MASTER_ADDR"));
  CHECK_THROWS_WITH(read({{"PMIX_RANK", "0"}}),
                    Catch::Contains("PMIX_RANK is set but no world size"));
}

TEST_CASE("Slurm's per-node task counts and local ids", "[launch_env]") {
  // Finding 4: plain srun sets SLURM_TASKS_PER_NODE and SLURM_LOCALID, not SLURM_NTASKS_PER_NODE.
  dist::LaunchEnv env = read(srun_task(3, 1));
  CHECK(env.local_rank == 1);
  CHECK(env.local_world_size == 2);
  CHECK(read(srun_task(2, 1, "3,1")).local_world_size == 1);
  CHECK(dist::slurm_tasks_on_node("2(x3),1", 0, "X") == 2);
  CHECK(dist::slurm_tasks_on_node("2(x3),1", 2, "X") == 2);
  CHECK(dist::slurm_tasks_on_node("2(x3),1", 3, "X") == 1);
  CHECK(dist::slurm_tasks_on_node("16", 0, "X") == 16);
  CHECK_THROWS_WITH(dist::slurm_tasks_on_node("2(x3),1", 4, "SLURM_TASKS_PER_NODE"),
                    Catch::Contains("SLURM_TASKS_PER_NODE='2(x3),1' has no entry for node 4"));
  for (const char* bad : {"", "x", "2(3)", "2(x3", "2,,1", "0"})
    CHECK_THROWS_WITH(dist::slurm_tasks_on_node(bad, 0, "SLURM_TASKS_PER_NODE"),
                      Catch::Contains("SLURM_TASKS_PER_NODE='" + std::string(bad) + "'"));
  // The step's own list wins over the job's.
  auto step = srun_task(0);
  step["SLURM_STEP_TASKS_PER_NODE"] = "1(x4)";
  step["SLURM_LOCALID"] = "0";
  CHECK(read(step).local_world_size == 1);
  // One node: rank 0 listens on loopback, whatever the node's name resolves to.
  auto one_node = srun_task(1, 0, "4");
  dist::LaunchEnv local = read(one_node);
  CHECK(local.master_addr == "127.0.0.1");
  CHECK(local.listen_addr.empty());
  // Several nodes and a loopback MASTER_ADDR: the other nodes could never reach rank 0.
  auto loop = srun_task(0);
  loop["MASTER_ADDR"] = "127.0.0.1";
  CHECK_THROWS_WITH(read(loop), Catch::Contains("MASTER_ADDR=127.0.0.1 is a loopback address"));
}

TEST_CASE("a batch script or salloc shell outside a job step: a group of one or an error at once",
          "[launch_env]") {
  // Finding 3: sbatch without -n, sbatch -n2 and salloc -n2, as Slurm 22.05 sets them.
  dist::LaunchEnv alone = read({{"SLURM_JOB_ID", "5"},
                                {"SLURM_PROCID", "0"},
                                {"SLURM_LOCALID", "0"},
                                {"SLURM_TASKS_PER_NODE", "1"}});
  CHECK_FALSE(alone.launched);
  CHECK(alone.world_size == 1);
  CHECK_THROWS_WITH(read({{"SLURM_JOB_ID", "6"},
                          {"SLURM_PROCID", "0"},
                          {"SLURM_NTASKS", "2"},
                          {"SLURM_TASKS_PER_NODE", "2"}}),
                    Catch::Contains("batch script or salloc shell of Slurm job 6") &&
                        Catch::Contains("SLURM_NTASKS=2") && Catch::Contains("start it with srun"));
  CHECK_THROWS_WITH(read({{"SLURM_JOB_ID", "7"}, {"SLURM_NTASKS", "2"}}),
                    Catch::Contains("outside a job step"));
}

TEST_CASE("without a token, rank 0 says once how to set one", "[launch_env]") {
  // Finding 2: nothing warned, and any process presenting the empty token was admitted.
  dist::LaunchEnv env = read(srun_task(0));
  const std::string advice = dist::missing_token_advice(env);
  CHECK_THAT(advice,
             Catch::Contains("no cluster token (TENSORPLAY_CLUSTER_TOKEN)") &&
                 Catch::Contains("export TENSORPLAY_CLUSTER_TOKEN=$(openssl rand -hex 16)"));
  CHECK(dist::missing_token_advice(read(srun_task(1))).empty());  // rank 0 alone says it
  auto with_token = srun_task(0);
  with_token["TENSORPLAY_CLUSTER_TOKEN"] = "s3cret";
  CHECK(dist::missing_token_advice(read(with_token)).empty());
  CHECK(dist::missing_token_advice(read({})).empty());  // a group of one
}

TEST_CASE("the UCX variables tp-launch sets, where nothing set them", "[launch_env]") {
  // Finding 5: outside tp-launch nothing turned them off.
  using Settings = std::vector<std::pair<std::string, std::string>>;
  CHECK(dist::missing_ucx_settings([](const char*) -> const char* { return nullptr; }) ==
        Settings{{"UCX_VFS_ENABLE", "n"}, {"UCX_MEM_EVENTS", "no"}});
  CHECK(dist::missing_ucx_settings([](const char* name) -> const char* {
          return std::string(name) == "UCX_MEM_EVENTS" ? "yes" : nullptr;
        }) == Settings{{"UCX_VFS_ENABLE", "n"}});
}
