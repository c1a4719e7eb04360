// Tests for launch_env.h: torchrun's, Open MPI's and Slurm's variables, their precedence, and a
// clear error naming each missing or inconsistent variable.
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
  CHECK(dist::first_slurm_host("node[3,5-9]") == "node3");
  CHECK(dist::first_slurm_host("a,b") == "a");
  CHECK(dist::first_slurm_host("rack[1-2]-n[4-5]") == "rack1-n[4-5]");
  CHECK_THROWS_WITH(dist::first_slurm_host("n[1-2"), Catch::Contains("unclosed"));
  CHECK_THROWS_WITH(read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}),
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
