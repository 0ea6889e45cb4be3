// The launcher environment a rank reads at start-up: one row per launcher as
// it really sets its variables, the precedence when several are visible, and
// every error a user can meet, with the variable named. Also NCCL_COMM_ID.

#include <QtTest>

#include "profiler/launch_env.h"

using cs::profiler::Environment;
using cs::profiler::Launcher;

Q_DECLARE_METATYPE(Environment)

namespace {

Environment env_of(std::initializer_list<std::pair<const char*, const char*>> vars) {
  Environment env;
  for (const auto& [name, value] : vars)
    env.emplace(name, value);
  return env;
}

}  // namespace

class TestLaunchEnv : public QObject {
  Q_OBJECT

 private slots:
  void launchers_data();
  void launchers();
  void errors_data();
  void errors();
  void ncclCommId_data();
  void ncclCommId();
  void ncclRendezvousFromEnvironment();
  void currentEnvironmentReadsThisProcess();
  void sharedRunId_data();
  void sharedRunId();
};

void TestLaunchEnv::launchers_data() {
  QTest::addColumn<Environment>("env");
  QTest::addColumn<int>("launcher");
  QTest::addColumn<int>("rank");
  QTest::addColumn<int>("world");
  QTest::addColumn<int>("local_rank");
  QTest::addColumn<int>("local_world");  // -1: unknown
  QTest::addColumn<int>("node");         // -1: unknown
  QTest::addColumn<QString>("description");

  QTest::addRow("no launcher") << env_of({{"HOME", "/root"}}) << int(Launcher::none) << 0 << 1 << 0
                               << 1 << -1 << "rank 0 of 1 (local 0 of 1), a single process";
  QTest::addRow("torchrun 2 nodes x 4") << env_of({{"RANK", "5"},
                                                   {"WORLD_SIZE", "8"},
                                                   {"LOCAL_RANK", "1"},
                                                   {"LOCAL_WORLD_SIZE", "4"},
                                                   {"GROUP_RANK", "1"},
                                                   {"MASTER_ADDR", "node0"},
                                                   {"TORCHELASTIC_RUN_ID", "none"}})
                                        << int(Launcher::torchrun) << 5 << 8 << 1 << 4 << 1
                                        << "rank 5 of 8 (local 1 of 4, node 1) from torchrun";
  QTest::addRow("torchrun one process")
      << env_of(
             {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}})
      << int(Launcher::torchrun) << 0 << 1 << 0 << 1 << -1
      << "rank 0 of 1 (local 0 of 1) from torchrun";
  QTest::addRow("torch.distributed.launch --use_env (no LOCAL_WORLD_SIZE)")
      << env_of({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}})
      << int(Launcher::torchrun) << 2 << 4 << 2 << -1 << -1
      << "rank 2 of 4 (local 2) from torchrun";
  QTest::addRow("torchrun inside a Slurm step wins")
      << env_of({{"RANK", "3"},
                 {"WORLD_SIZE", "16"},
                 {"LOCAL_RANK", "3"},
                 {"LOCAL_WORLD_SIZE", "8"},
                 {"SLURM_PROCID", "0"},
                 {"SLURM_STEP_ID", "0"},
                 {"SLURM_NTASKS", "2"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", "0"}})
      << int(Launcher::torchrun) << 3 << 16 << 3 << 8 << -1
      << "rank 3 of 16 (local 3 of 8) from torchrun";
  QTest::addRow("mpirun") << env_of({{"OMPI_COMM_WORLD_RANK", "6"},
                                     {"OMPI_COMM_WORLD_SIZE", "8"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                     {"OMPI_COMM_WORLD_NODE_RANK", "2"}})
                          << int(Launcher::open_mpi) << 6 << 8 << 2 << 4 << -1
                          << "rank 6 of 8 (local 2 of 4) from Open MPI";
  QTest::addRow("mpirun inside sbatch wins over the batch step")
      << env_of({{"OMPI_COMM_WORLD_RANK", "1"},
                 {"OMPI_COMM_WORLD_SIZE", "2"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                 {"SLURM_PROCID", "0"},
                 {"SLURM_NTASKS", "2"},
                 {"SLURM_LOCALID", "0"}})
      << int(Launcher::open_mpi) << 1 << 2 << 1 << 2 << -1
      << "rank 1 of 2 (local 1 of 2) from Open MPI";
  QTest::addRow("MPICH hydra") << env_of({{"PMI_RANK", "3"},
                                          {"PMI_SIZE", "4"},
                                          {"MPI_LOCALRANKID", "1"},
                                          {"MPI_LOCALNRANKS", "2"}})
                               << int(Launcher::pmi) << 3 << 4 << 1 << 2 << -1
                               << "rank 3 of 4 (local 1 of 2) from PMI";
  QTest::addRow("srun --mpi=pmi2")
      << env_of({{"PMI_RANK", "9"},
                 {"PMI_SIZE", "16"},
                 {"SLURM_PROCID", "9"},
                 {"SLURM_STEP_ID", "0"},
                 {"SLURM_NTASKS", "16"},
                 {"SLURM_LOCALID", "1"},
                 {"SLURM_NODEID", "4"}})
      << int(Launcher::pmi) << 9 << 16 << 1 << -1 << -1 << "rank 9 of 16 (local 1) from PMI";
  QTest::addRow("srun, uniform tasks per node")
      << env_of({{"SLURM_PROCID", "13"},
                 {"SLURM_STEP_ID", "0"},
                 {"SLURM_STEP_NUM_TASKS", "16"},
                 {"SLURM_NTASKS", "32"},
                 {"SLURM_LOCALID", "5"},
                 {"SLURM_NODEID", "1"},
                 {"SLURM_STEP_TASKS_PER_NODE", "8(x2)"}})
      << int(Launcher::slurm) << 13 << 16 << 5 << 8 << 1
      << "rank 13 of 16 (local 5 of 8, node 1) from Slurm";
  QTest::addRow("srun, uneven tasks per node") << env_of({{"SLURM_PROCID", "6"},
                                                          {"SLURM_STEPID", "2"},
                                                          {"SLURM_NTASKS", "7"},
                                                          {"SLURM_LOCALID", "0"},
                                                          {"SLURM_NODEID", "3"},
                                                          {"SLURM_TASKS_PER_NODE", "2(x3),1"}})
                                               << int(Launcher::slurm) << 6 << 7 << 0 << 1 << 3
                                               << "rank 6 of 7 (local 0 of 1, node 3) from Slurm";
  QTest::addRow("srun with --ntasks-per-node only")
      << env_of({{"SLURM_PROCID", "2"},
                 {"SLURM_STEP_ID", "0"},
                 {"SLURM_NTASKS", "4"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", "1"},
                 {"SLURM_NTASKS_PER_NODE", "2"}})
      << int(Launcher::slurm) << 2 << 4 << 0 << 2 << 1
      << "rank 2 of 4 (local 0 of 2, node 1) from Slurm";
  QTest::addRow("a Slurm batch script is not a step task")
      << env_of({{"SLURM_PROCID", "0"},
                 {"SLURM_NTASKS", "8"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", "0"},
                 {"SLURM_JOB_ID", "123"}})
      << int(Launcher::none) << 0 << 1 << 0 << 1 << -1
      << "rank 0 of 1 (local 0 of 1), a single process";
  QTest::addRow("values with spaces around")
      << env_of({{"RANK", " 1 "}, {"WORLD_SIZE", "2\n"}, {"LOCAL_RANK", "1"}})
      << int(Launcher::torchrun) << 1 << 2 << 1 << -1 << -1
      << "rank 1 of 2 (local 1) from torchrun";
}

void TestLaunchEnv::launchers() {
  QFETCH(Environment, env);
  QFETCH(int, launcher);
  QFETCH(int, rank);
  QFETCH(int, world);
  QFETCH(int, local_rank);
  QFETCH(int, local_world);
  QFETCH(int, node);
  QFETCH(QString, description);
  auto parsed = cs::profiler::parse_launch_env(env);
  QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.message().c_str());
  QCOMPARE(int(parsed->launcher), launcher);
  QCOMPARE(parsed->rank, rank);
  QCOMPARE(parsed->world_size, world);
  QCOMPARE(parsed->local_rank, local_rank);
  QCOMPARE(parsed->local_world_size.value_or(-1), local_world);
  QCOMPARE(parsed->node_rank.value_or(-1), node);
  QCOMPARE(QString::fromStdString(parsed->describe()), description);
}

void TestLaunchEnv::errors_data() {
  QTest::addColumn<Environment>("env");
  QTest::addColumn<QString>("message");

  QTest::addRow("rank not a number")
      << env_of({{"RANK", "abc"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}})
      << "RANK=\"abc\" is not a non-negative whole number";
  QTest::addRow("negative rank") << env_of(
                                        {{"RANK", "-1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}})
                                 << "RANK=\"-1\" is not a non-negative whole number";
  QTest::addRow("trailing junk") << env_of(
                                        {{"RANK", "1"}, {"WORLD_SIZE", "4x"}, {"LOCAL_RANK", "0"}})
                                 << "WORLD_SIZE=\"4x\" is not a non-negative whole number";
  QTest::addRow("empty value") << env_of({{"RANK", ""}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}})
                               << "RANK=\"\" is not a non-negative whole number";
  QTest::addRow("overflow") << env_of({{"RANK", "99999999999"},
                                       {"WORLD_SIZE", "4"},
                                       {"LOCAL_RANK", "0"}})
                            << "RANK=\"99999999999\" is not a non-negative whole number";
  QTest::addRow("rank equals world size")
      << env_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}})
      << "RANK=4 is not below WORLD_SIZE=4";
  QTest::addRow("world size zero")
      << env_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}, {"LOCAL_RANK", "0"}})
      << "WORLD_SIZE=0 must be at least 1";
  QTest::addRow("rank without world size")
      << env_of({{"RANK", "1"}, {"LOCAL_RANK", "1"}}) << "RANK is set but WORLD_SIZE is not";
  QTest::addRow("world size without rank")
      << env_of({{"WORLD_SIZE", "2"}}) << "WORLD_SIZE is set but RANK is not";
  QTest::addRow("torchrun without local rank")
      << env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}}) << "but LOCAL_RANK is not";
  QTest::addRow("local rank alone")
      << env_of({{"LOCAL_RANK", "0"}}) << "LOCAL_RANK is set but RANK and WORLD_SIZE are not";
  QTest::addRow("local rank beyond local size")
      << env_of(
             {{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "4"}, {"LOCAL_WORLD_SIZE", "4"}})
      << "LOCAL_RANK=4 is not below LOCAL_WORLD_SIZE=4";
  QTest::addRow("local size beyond world")
      << env_of(
             {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}})
      << "LOCAL_WORLD_SIZE=4 is larger than WORLD_SIZE=2";
  QTest::addRow("local rank beyond world when local size unknown")
      << env_of({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}})
      << "LOCAL_RANK=2 is not below WORLD_SIZE=2";
  QTest::addRow("mpirun rank beyond size")
      << env_of({{"OMPI_COMM_WORLD_RANK", "8"},
                 {"OMPI_COMM_WORLD_SIZE", "8"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}})
      << "OMPI_COMM_WORLD_RANK=8 is not below OMPI_COMM_WORLD_SIZE=8";
  QTest::addRow("mpirun without local rank")
      << env_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "8"}})
      << "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_LOCAL_RANK is not";
  QTest::addRow("PMI without size") << env_of({{"PMI_RANK", "0"}, {"MPI_LOCALRANKID", "0"}})
                                    << "PMI_RANK is set but PMI_SIZE is not";
  QTest::addRow("PMI without local rank")
      << env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}) << "PMI_RANK is set but no local rank is";
  QTest::addRow("srun without task count")
      << env_of({{"SLURM_PROCID", "0"}, {"SLURM_STEP_ID", "0"}, {"SLURM_LOCALID", "0"}})
      << "SLURM_PROCID is set but neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS is";
  QTest::addRow("srun procid beyond step tasks")
      << env_of({{"SLURM_PROCID", "16"},
                 {"SLURM_STEP_ID", "0"},
                 {"SLURM_STEP_NUM_TASKS", "16"},
                 {"SLURM_NTASKS", "32"},
                 {"SLURM_LOCALID", "0"}})
      << "SLURM_PROCID=16 is not below SLURM_STEP_NUM_TASKS=16";
  QTest::addRow("srun malformed tasks per node")
      << env_of({{"SLURM_PROCID", "0"},
                 {"SLURM_STEP_ID", "0"},
                 {"SLURM_NTASKS", "2"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", "0"},
                 {"SLURM_TASKS_PER_NODE", "2(3)"}})
      << "SLURM_TASKS_PER_NODE=\"2(3)\" is not a task list such as \"2(x3),1\"";
  QTest::addRow("srun node beyond tasks per node")
      << env_of({{"SLURM_PROCID", "0"},
                 {"SLURM_STEP_ID", "0"},
                 {"SLURM_NTASKS", "2"},
                 {"SLURM_LOCALID", "0"},
                 {"SLURM_NODEID", "5"},
                 {"SLURM_TASKS_PER_NODE", "1(x2)"}})
      << "SLURM_TASKS_PER_NODE=\"1(x2)\" lists 2 nodes but SLURM_NODEID=5";
  QTest::addRow("srun local id beyond tasks on node")
      << env_of({{"SLURM_PROCID", "3"},
                 {"SLURM_STEP_ID", "0"},
                 {"SLURM_NTASKS", "4"},
                 {"SLURM_LOCALID", "2"},
                 {"SLURM_NODEID", "1"},
                 {"SLURM_TASKS_PER_NODE", "2(x2)"}})
      << "SLURM_LOCALID=2 is not below SLURM_TASKS_PER_NODE=2";
}

void TestLaunchEnv::errors() {
  QFETCH(Environment, env);
  QFETCH(QString, message);
  auto parsed = cs::profiler::parse_launch_env(env);
  QVERIFY2(!parsed.ok(), parsed.ok() ? qPrintable(QString::fromStdString(parsed->describe())) : "");
  QVERIFY2(QString::fromStdString(parsed.message()).contains(message), parsed.message().c_str());
}

void TestLaunchEnv::ncclCommId_data() {
  QTest::addColumn<QString>("value");
  QTest::addColumn<QString>("host");  // empty: an error is expected
  QTest::addColumn<int>("port");
  QTest::addColumn<QString>("message");

  QTest::addRow("hostname") << "node0:29500"
                            << "node0" << 29500 << "";
  QTest::addRow("ipv4") << "10.0.0.7:1234"
                        << "10.0.0.7" << 1234 << "";
  QTest::addRow("ipv6") << "[fe80::1%eth0]:8000"
                        << "fe80::1%eth0" << 8000 << "";
  QTest::addRow("fqdn") << "gpu-a12.cluster.example.org:65535"
                        << "gpu-a12.cluster.example.org" << 65535 << "";
  QTest::addRow("no port") << "node0"
                           << "" << 0 << "has no port";
  QTest::addRow("port zero") << "node0:0"
                             << "" << 0 << "is not a number from 1 to 65535";
  QTest::addRow("port too big") << "node0:70000"
                                << "" << 0 << "is not a number from 1 to 65535";
  QTest::addRow("port not a number") << "node0:http"
                                     << "" << 0 << "the port \"http\" is not a number";
  QTest::addRow("no host") << ":29500"
                           << "" << 0 << "has no host before the port";
  QTest::addRow("bare ipv6") << "fe80::1:8000"
                             << "" << 0 << "write it as [address]:port";
  QTest::addRow("unclosed bracket") << "[fe80::1:8000"
                                    << "" << 0 << "never closes it";
  QTest::addRow("bad character") << "node 0:29500"
                                 << "" << 0 << "a character a host name cannot contain";
  QTest::addRow("empty") << "  "
                         << "" << 0 << "is empty";
}

void TestLaunchEnv::ncclCommId() {
  QFETCH(QString, value);
  QFETCH(QString, host);
  QFETCH(int, port);
  QFETCH(QString, message);
  auto parsed = cs::profiler::parse_nccl_comm_id(value.toStdString());
  if (host.isEmpty()) {
    QVERIFY(!parsed.ok());
    QVERIFY2(QString::fromStdString(parsed.message()).contains(message), parsed.message().c_str());
    QVERIFY(QString::fromStdString(parsed.message()).startsWith("NCCL_COMM_ID=\""));
    return;
  }
  QVERIFY2(parsed.ok(), parsed.ok() ? "" : parsed.message().c_str());
  QCOMPARE(QString::fromStdString(parsed->host), host);
  QCOMPARE(parsed->port, port);
  // Written back as NCCL reads it.
  auto again = cs::profiler::parse_nccl_comm_id(parsed->to_string());
  QVERIFY(again.ok());
  QCOMPARE(again->host, parsed->host);
  QCOMPARE(again->port, parsed->port);
}

void TestLaunchEnv::ncclRendezvousFromEnvironment() {
  auto none = cs::profiler::nccl_rendezvous_from(env_of({{"RANK", "0"}}));
  QVERIFY(none.ok());
  QVERIFY(!none->has_value());
  auto empty = cs::profiler::nccl_rendezvous_from(env_of({{"NCCL_COMM_ID", ""}}));
  QVERIFY(empty.ok());
  QVERIFY(!empty->has_value());
  auto set = cs::profiler::nccl_rendezvous_from(env_of({{"NCCL_COMM_ID", "node3:29501"}}));
  QVERIFY(set.ok());
  QCOMPARE((*set)->to_string(), std::string("node3:29501"));
  auto bad = cs::profiler::nccl_rendezvous_from(env_of({{"NCCL_COMM_ID", "node3"}}));
  QVERIFY(!bad.ok());
}

void TestLaunchEnv::currentEnvironmentReadsThisProcess() {
  qputenv("CS_TEST_LAUNCH_ENV", "a=b");
  const Environment env = cs::profiler::current_environment();
  auto it = env.find("CS_TEST_LAUNCH_ENV");
  QVERIFY(it != env.end());
  QCOMPARE(it->second, std::string("a=b"));
}

// The id every rank of one launch shares: a worker started by hand under
// mpirun recorded none (a merge then compared command lines, the same for
// two runs of one command), and one under mpirun inside a Slurm job took
// its batch's job id on one node and a step's on the next.
void TestLaunchEnv::sharedRunId_data() {
  QTest::addColumn<Environment>("env");
  QTest::addColumn<QString>("id");
  const auto ompi4 = std::initializer_list<std::pair<const char*, const char*>>{
      {"OMPI_COMM_WORLD_RANK", "1"},
      {"OMPI_COMM_WORLD_SIZE", "2"},
      {"PMIX_NAMESPACE", "307036161"},
      {"OMPI_MCA_ess_base_jobid", "307036161"},
      {"OMPI_MCA_orte_hnp_uri", "307036160.0;tcp://192.0.2.2:53861"}};
  QTest::addRow("nothing") << env_of({}) << "";
  QTest::addRow("torchrun") << env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}) << "";
  QTest::addRow("clusterscope profile")
      << env_of({{"CLUSTERSCOPE_RUN_ID", "20261205T155901Z-3f9a2c1b"},
                 {"OMPI_COMM_WORLD_SIZE", "2"},
                 {"PMIX_NAMESPACE", "1"}})
      << "20261205T155901Z-3f9a2c1b";
  // 32-bit FNV-1a of the mpirun's address.
  QTest::addRow("Open MPI 4") << env_of(ompi4) << "openmpi-307036161-b1dc1436";
  Environment other_port = env_of(ompi4);
  other_port["OMPI_MCA_orte_hnp_uri"] = "307036160.0;tcp://192.0.2.2:53862";
  QTest::addRow("Open MPI 4, another mpirun of that pid")
      << other_port << "openmpi-307036161-b0dc12a3";
  QTest::addRow("Open MPI 5") << env_of({{"OMPI_COMM_WORLD_RANK", "0"},
                                         {"OMPI_COMM_WORLD_SIZE", "2"},
                                         {"PMIX_NAMESPACE", "prterun-node1-4242@1"}})
                              << "openmpi-prterun-node1-4242@1";
  QTest::addRow("Open MPI, a job id only")
      << env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_MCA_ess_base_jobid", "77"}}) << "openmpi-77";
  Environment in_slurm = env_of(ompi4);
  in_slurm["SLURM_JOB_ID"] = "123";
  in_slurm["SLURM_STEP_ID"] = "0";
  QTest::addRow("mpirun inside a Slurm job") << in_slurm << "openmpi-307036161-b1dc1436";
  QTest::addRow("a Slurm job step")
      << env_of({{"SLURM_JOB_ID", "123"}, {"SLURM_STEP_ID", "4"}, {"SLURM_PROCID", "1"}})
      << "slurm-123.4";
  QTest::addRow("a Slurm batch script") << env_of({{"SLURM_JOB_ID", "123"}}) << "slurm-123";
  QTest::addRow("empty values") << env_of({{"CLUSTERSCOPE_RUN_ID", ""}, {"SLURM_JOB_ID", " "}})
                                << "";
}

void TestLaunchEnv::sharedRunId() {
  QFETCH(Environment, env);
  QFETCH(QString, id);
  QCOMPARE(QString::fromStdString(cs::profiler::shared_run_id(env)), id);
}

QTEST_GUILESS_MAIN(TestLaunchEnv)
#include "tst_launch_env.moc"
