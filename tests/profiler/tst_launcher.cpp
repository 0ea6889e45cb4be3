// The launcher: hostfiles and their errors, what it reads from mpirun, the
// Slurm script, argument-vector safety, and real runs through mpirun where a
// rank is killed, a rank hangs, a rank fails, or the user cancels.

#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include <signal.h>
#include <sys/stat.h>

#include "core/host_name.h"
#include "core/trace_reader.h"
#include "core/trace_store.h"
#include "profiler/hostfile.h"
#include "profiler/launcher.h"
#include "profiler/mpirun_output.h"
#include "tests/profiler/worker_runs.h"

using namespace cs;
using namespace cs::launch;
using namespace std::chrono_literals;

namespace {

// A run that would take minutes: long enough to be killed, stopped or cancelled.
// `store`: the run store's path ("" records nothing).
RunSpec endless_run(int ranks, const QString& store = {}) {
  std::vector<std::string> args = test::tiny_model_args();
  args.insert(args.end(),
              {"--steps", "1000000", "--dp", std::to_string(ranks), "--micro-batch", "1"});
  RunSpec spec = test::worker_spec(ranks, args);
  spec.run_store = store.toStdString();
  return spec;
}

// A process's parent (mpirun, for a rank): the fourth field of /proc/PID/stat.
pid_t parent_of(std::int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  if (line.rfind(')') == std::string::npos) return 0;
  std::istringstream fields(line.substr(line.rfind(')') + 2));
  char state = 0;
  pid_t parent = 0;
  fields >> state >> parent;
  return parent;
}

// The text of the launcher's "hung" event, kept from its monitor thread.
struct HungText {
  std::mutex mutex;
  std::string text;
  Launcher::Callback watch() {
    return [this](const LaunchEvent& e) {
      std::lock_guard lock(mutex);
      if (e.kind == LaunchEvent::Kind::hung) text = e.text;
    };
  }
  QString get() {
    std::lock_guard lock(mutex);
    return QString::fromStdString(text);
  }
};

bool every_rank_reached(const Launcher& launcher, int step) {
  for (const RankStatus& r : launcher.ranks()) {
    if (r.step < step || r.pid <= 0) return false;
  }
  return true;
}

QString describe(const RunReport& r) {
  QString text = QString("outcome %1: %2")
                     .arg(QString::fromStdString(std::string(to_string(r.outcome))),
                          QString::fromStdString(r.message));
  for (const std::string& l : r.mpirun_lines)
    text += "\n  mpirun: " + QString::fromStdString(l);
  return text;
}

// A store as the tests see it: status and each rank's steps (0, 1, ... in order).
struct StoreView {
  std::string error;
  std::string status;
  std::map<int, int> steps;            // rank -> steps recorded
  std::map<int, std::int64_t> events;  // rank -> events recorded
  bool steps_in_order = true;

  int steps_of(int rank) const { return steps.count(rank) ? steps.at(rank) : -1; }
  std::int64_t events_of(int rank) const { return events.count(rank) ? events.at(rank) : -1; }
};

StoreView view_store(const std::string& path) {
  StoreView v;
  auto reader = trace::TraceReader::open(path);
  if (!reader) {
    v.error = reader.message();
    return v;
  }
  v.status = (*reader)->state().status;
  for (const trace::RankInfo& rank : (*reader)->ranks()) {
    auto steps = (*reader)->steps(rank.rank);
    if (!steps) {
      v.error = steps.message();
      return v;
    }
    for (std::size_t i = 0; i < steps->size(); ++i) {
      if ((*steps)[i].step != static_cast<int>(i)) v.steps_in_order = false;
    }
    v.steps[rank.rank] = static_cast<int>(steps->size());
    std::int64_t count = 0;
    for (const trace::LaneInfo& lane : (*reader)->lanes_of(rank.rank))
      count += lane.event_count;
    v.events[rank.rank] = count;
  }
  return v;
}

bool write_text(const QString& path, const QByteArray& text) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return false;
  f.write(text);
  return true;
}

// Titles and host names that would run a command if they reached a shell.
const char* kHostile =
    "x'; touch %1/pwned-a; echo '$(touch %1/pwned-b)`touch %1/pwned-c`\"; touch %1/pwned-d";

}  // namespace

class TestLauncher : public QObject {
  Q_OBJECT

 private slots:
  void hostfileParsing_data();
  void hostfileParsing();
  void hostfileErrors_data();
  void hostfileErrors();
  void missingHostfileIsNamed();
  void taggedLines_data();
  void taggedLines();
  void splitLinesAreReassembled();
  void lineOfBracketsIsLinear();
  void mpirunNotices_data();
  void mpirunNotices();
  void mpirunCommand();
  void slurmScriptContent();
  void slurmScriptRefusesBadValues();
  void slurmScriptQuotesEveryValue();
  void slurmWithoutSbatchWritesTheScript();
  void hostileTitleRunsNothing();
  void hostileHostfileRunsNothing();
  void hostfileRunOnThisMachine();
  void hostfileTooFewSlots();
  void unreachableHostIsReported();
  void missingWorkerOrMpirun();
  void failingRankIsNamed_data();
  void failingRankIsNamed();
  void killedRankIsNamed();
  void ranksOfAKilledJobAreLost();
  void cancelStopsEveryRank();
  void rankKilledDuringACancelIsACrash();
  void sweepRanksAreKnown();
  void hungRunIsStopped();
  void rankStoppedBeforeItStartedIsNamed();
  void stoppedMpirunIsNamed();
  void skippedStepIsAStep();

 private:
  QTemporaryDir dir_;
};

void TestLauncher::hostfileParsing_data() {
  QTest::addColumn<QByteArray>("text");
  QTest::addColumn<QStringList>("names");
  QTest::addColumn<int>("slot_total");
  QTest::addRow("one per line") << QByteArray("node1\nnode2\n") << QStringList{"node1", "node2"}
                                << 2;
  QTest::addRow("slots and max_slots")
      << QByteArray("gpu-01 slots=8 max_slots=8\ngpu-02 slots=4 max-slots=6\n")
      << QStringList{"gpu-01", "gpu-02"} << 12;
  QTest::addRow("comments, blanks, CRLF, tabs")
      << QByteArray("# the cluster\r\n\r\n  n1.example.org\tslots=2  # two ranks\r\nn2 # one\r\n")
      << QStringList{"n1.example.org", "n2"} << 3;
  QTest::addRow("no final newline")
      << QByteArray("10.0.0.7 slots=3") << QStringList{"10.0.0.7"} << 3;
  QTest::addRow("IPv6 and underscores")
      << QByteArray("fe80::1\nrack_3-node\n") << QStringList{"fe80::1", "rack_3-node"} << 2;
  // 2048 hosts of the most slots a line may give: 2^31, past an int (the
  // sum overflowed, undefined behaviour); the total is capped at INT_MAX.
  QByteArray many;
  QStringList many_names;
  for (int i = 0; i < 2048; ++i) {
    many += "n" + QByteArray::number(i) + " slots=1048576\n";
    many_names << "n" + QString::number(i);
  }
  QTest::addRow("more slots than an int") << many << many_names << std::numeric_limits<int>::max();
}

void TestLauncher::hostfileParsing() {
  QFETCH(QByteArray, text);
  QFETCH(QStringList, names);
  QFETCH(int, slot_total);
  auto hosts = parse_hostfile(text.toStdString(), "hosts.txt");
  QVERIFY2(hosts.ok(), hosts.ok() ? "" : hosts.message().c_str());
  QStringList got;
  for (const Host& h : *hosts)
    got << QString::fromStdString(h.name);
  QCOMPARE(got, names);
  QCOMPARE(total_slots(*hosts), slot_total);
  // What mpirun is handed reads back the same.
  auto again = parse_hostfile(format_hostfile(*hosts), "copy");
  QVERIFY(again.ok());
  QCOMPARE(total_slots(*again), slot_total);
}

void TestLauncher::hostfileErrors_data() {
  QTest::addColumn<QByteArray>("text");
  QTest::addColumn<QStringList>("messages");
  QTest::addRow("shell in a host name")
      << QByteArray("node1\nnode2;touch /tmp/x slots=2\n")
      << QStringList{"hosts.txt:2: \"node2;touch\" is not a host name"};
  QTest::addRow("command substitution")
      << QByteArray("$(reboot)\n") << QStringList{"hosts.txt:1: \"$(reboot)\" is not a host name"};
  QTest::addRow("leading dash (an ssh option)")
      << QByteArray("-oProxyCommand=x\n")
      << QStringList{"hosts.txt:1: \"-oProxyCommand=x\" is not a host name"};
  QTest::addRow("zero slots") << QByteArray("n1 slots=0\n")
                              << QStringList{
                                     "hosts.txt:1: slots must be a whole number from 1 to 1048576 (got \"0\")"};
  QTest::addRow("slots not a number")
      << QByteArray("n1\nn2 slots=four\n")
      << QStringList{"hosts.txt:2: slots must be a whole number from 1 to 1048576 (got \"four\")"};
  // Past the bound, the message said ">= 1" of 99999999999.
  QTest::addRow("slots past any host")
      << QByteArray("n1 slots=99999999999\n")
      << QStringList{"hosts.txt:1: slots must be a whole number from 1 to 1048576 (got "
                     "\"99999999999\")"};
  QTest::addRow("unknown word") << QByteArray("n1 cpus=4\n")
                                << QStringList{"hosts.txt:1: unexpected \"cpus=4\""};
  QTest::addRow("slots above max") << QByteArray("n1 slots=8 max_slots=4\n")
                                   << QStringList{"hosts.txt:1: slots=8 exceeds max_slots=4"};
  QTest::addRow("every problem, each with its line")
      << QByteArray("ok-node\nbad|node\n\n# fine\nn3 slots=-1\n")
      << QStringList{"hosts.txt:2: \"bad|node\"", "hosts.txt:5: slots must be"};
  QTest::addRow("empty") << QByteArray("# nothing\n\n")
                         << QStringList{"hosts.txt: no hosts listed"};
  QTest::addRow("control characters shown")
      << QByteArray("n1\x1b[2J\n") << QStringList{"\"n1\\x1b[2J\" is not a host name"};
}

void TestLauncher::hostfileErrors() {
  QFETCH(QByteArray, text);
  QFETCH(QStringList, messages);
  auto hosts = parse_hostfile(text.toStdString(), "hosts.txt");
  QVERIFY(!hosts.ok());
  for (const QString& m : messages) {
    QVERIFY2(QString::fromStdString(hosts.message()).contains(m),
             qPrintable(QString::fromStdString(hosts.message()) + "\n  lacks: " + m));
  }
}

void TestLauncher::missingHostfileIsNamed() {
  auto hosts = read_hostfile("/nonexistent/hosts.txt");
  QVERIFY(!hosts.ok());
  QCOMPARE(QString::fromStdString(hosts.message()),
           QString("/nonexistent/hosts.txt: cannot open hostfile"));
  // A folder read as an empty file: "no hosts listed".
  auto folder = read_hostfile(dir_.path().toStdString());
  QVERIFY(!folder.ok());
  QCOMPARE(QString::fromStdString(folder.message()),
           dir_.path() + ": is a folder, not a hostfile");
}

void TestLauncher::taggedLines_data() {
  QTest::addColumn<QString>("line");
  QTest::addColumn<int>("rank");
  QTest::addColumn<bool>("is_stderr");
  QTest::addColumn<QString>("text");
  QTest::addRow("stdout") << "[1,3]<stdout>:{\"event\":\"step\"}" << 3 << false
                          << "{\"event\":\"step\"}";
  QTest::addRow("stderr") << "[21109,12]<stderr>:boom" << 12 << true << "boom";
  QTest::addRow("empty text") << "[1,0]<stdout>:" << 0 << false << "";
  QTest::addRow("mpirun's own") << "mpirun noticed that process rank 1" << -1 << false
                                << "mpirun noticed that process rank 1";
  QTest::addRow("not a tag") << "[vm:15067] Read -1, expected 269824, errno = 3" << -1 << false
                             << "[vm:15067] Read -1, expected 269824, errno = 3";
  // A rank is a count: no sign (a negative one stripped the tag and left the
  // line unassigned).
  QTest::addRow("negative rank") << "[1,-2]<stdout>:x" << -1 << false << "[1,-2]<stdout>:x";
  QTest::addRow("signed rank") << "[1,+2]<stdout>:x" << -1 << false << "[1,+2]<stdout>:x";
}

void TestLauncher::taggedLines() {
  QFETCH(QString, line);
  QFETCH(int, rank);
  QFETCH(bool, is_stderr);
  QFETCH(QString, text);
  const std::string s = line.toStdString();
  const TaggedLine t = parse_tagged_line(s);
  QCOMPARE(t.rank, rank);
  QCOMPARE(t.stderr_stream, is_stderr);
  QCOMPARE(QString::fromStdString(std::string(t.text)), text);
}

// A rank's line of 1000000 '[' is mpirun's own text up to the tag after it:
// each '[' was parsed as a tag to the line's end (39 s in a release build;
// now milliseconds).
void TestLauncher::lineOfBracketsIsLinear() {
  const std::string brackets(1000000, '[');
  std::vector<std::pair<int, std::size_t>> pieces;
  TaggedLineAssembler assembler;
  QElapsedTimer timer;
  timer.start();
  assembler.feed(brackets + "[1,3]<stderr>:x",
                 [&](const TaggedLine& t) { pieces.emplace_back(t.rank, t.text.size()); });
  QVERIFY2(timer.elapsed() < 10000, qPrintable(QString::number(timer.elapsed()) + " ms"));
  QCOMPARE(pieces.size(), std::size_t{2});
  QCOMPARE(pieces[0].first, -1);
  QCOMPARE(pieces[0].second, brackets.size());
  QCOMPARE(pieces[1].first, 3);
  QCOMPARE(pieces[1].second, std::size_t{1});
}

// As Open MPI 4.1 printed it: rank 0's line read in two pieces, rank 1's lines between.
void TestLauncher::splitLinesAreReassembled() {
  const std::vector<std::string> physical = {
      R"([1,0]<stdout>:{"event":"step","step":47,"token[1,1]<stdout>:{"event":"step","step":49})",
      R"([1,1]<stdout>:{"event":"done","rank":1})",
      R"([1,0]<stdout>:s_per_second":67619.8})",
      R"([1,0]<stdout>:{"event":"step","step":48})",
      "[vm:42] 1 more process has sent help message",
  };
  std::vector<std::pair<int, std::string>> lines;
  TaggedLineAssembler assembler;
  for (const std::string& p : physical) {
    assembler.feed(p,
                   [&](const TaggedLine& t) { lines.emplace_back(t.rank, std::string(t.text)); });
  }
  const std::vector<std::pair<int, std::string>> expected = {
      {1, R"({"event":"step","step":49})"},
      {1, R"({"event":"done","rank":1})"},
      {0, R"({"event":"step","step":47,"tokens_per_second":67619.8})"},
      {0, R"({"event":"step","step":48})"},
      {-1, "[vm:42] 1 more process has sent help message"},
  };
  QCOMPARE(lines.size(), expected.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    QCOMPARE(lines[i].first, expected[i].first);
    QCOMPARE(QString::fromStdString(lines[i].second), QString::fromStdString(expected[i].second));
  }
}

void TestLauncher::mpirunNotices_data() {
  QTest::addColumn<QString>("output");
  QTest::addColumn<int>("rank");
  QTest::addColumn<int>("signal");
  QTest::addColumn<int>("exit_code");
  QTest::addColumn<bool>("mpi_abort");
  // Open MPI 4.1.4's words, as captured on this machine.
  QTest::addRow("killed")
      << "--------------------------------------------------------------------------\n"
         "Primary job  terminated normally, but 1 process returned\n"
         "a non-zero exit code. Per user-direction, the job has been aborted.\n"
         "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).\n"
      << 1 << 9 << -1 << false;
  QTest::addRow("segfault") << "mpirun noticed that process rank 3 with PID 4242 on node gpu-07 "
                               "exited on signal 11 (Segmentation fault).\n"
                            << 3 << 11 << -1 << false;
  QTest::addRow("exit code")
      << "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
         "the job to be terminated. The first process to do so was:\n\n"
         "  Process name: [[21109,1],1]\n"
         "  Exit code:    3\n"
      << 1 << 0 << 3 << false;
  QTest::addRow("MPI_Abort")
      << "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\n"
         "with errorcode 1.\n\n"
         "NOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\n"
      << 1 << 0 << 1 << true;
  QTest::addRow("first failure wins")
      << "mpirun noticed that process rank 2 with PID 0 on node a exited on signal 6 (Aborted).\n"
         "mpirun noticed that process rank 0 with PID 0 on node a exited on signal 15 "
         "(Terminated).\n"
      << 2 << 6 << -1 << false;
  // Numbers past an int (a rank's own output can imitate mpirun's words)
  // make no notice: std::stoi threw, and the launcher stopped.
  QTest::addRow("rank past an int, then a real notice")
      << "MPI_ABORT was invoked on rank 99999999999 in communicator MPI_COMM_WORLD\n"
         "mpirun noticed that process rank 2 with PID 0 on node a exited on signal 6 (Aborted).\n"
      << 2 << 6 << -1 << false;
  QTest::addRow("signal past an int")
      << "mpirun noticed that process rank 1 with PID 0 on node a exited on signal 99999999999.\n"
      << -1 << 0 << -1 << false;
  QTest::addRow("exit code past an int")
      << "  Process name: [[21109,1],1]\n  Exit code:    99999999999\n"
      << -1 << 0 << -1 << false;
  QTest::addRow("nothing") << "ssh: Could not resolve hostname no-such-node\n"
                           << -1 << 0 << -1 << false;
  // A line of 100000 characters that begins like a notice (a rank's output
  // can) overflowed the stack in std::regex; it is no notice, and the real
  // one after it still counts.
  QTest::addRow("a line longer than any notice")
      << "mpirun noticed that process rank 1 with PID 0 on node " + QString(100000, 'n') +
             " exited on signal 9\n"
             "mpirun noticed that process rank 2 with PID 0 on node a exited on signal 6 "
             "(Aborted).\n"
      << 2 << 6 << -1 << false;
}

void TestLauncher::mpirunNotices() {
  QFETCH(QString, output);
  QFETCH(int, rank);
  QFETCH(int, signal);
  QFETCH(int, exit_code);
  QFETCH(bool, mpi_abort);
  MpirunNotices notices;
  for (const QString& line : output.split('\n'))
    notices.feed(line.toStdString());
  if (rank < 0) {
    QVERIFY(!notices.failure());
    return;
  }
  QVERIFY(notices.failure());
  QCOMPARE(notices.failure()->rank, rank);
  QCOMPARE(notices.failure()->signal, signal);
  QCOMPARE(notices.failure()->exit_code, exit_code);
  QCOMPARE(notices.failure()->mpi_abort, mpi_abort);
}

void TestLauncher::mpirunCommand() {
  RunSpec spec;
  spec.worker = "/opt/cs/bin/clusterscope-worker";
  spec.worker_args = {"--dp", "4"};
  spec.ranks = 4;
  spec.run_store = "/data/runs/r1.db";
  spec.title = "a run";
  const auto argv = mpirun_command(spec);
  const QStringList got = [&] {
    QStringList l;
    for (const auto& a : argv)
      l << QString::fromStdString(a);
    return l;
  }();
  QCOMPARE(got.first(), QString("mpirun"));
  QVERIFY(got.contains("--tag-output"));
  QCOMPARE(got[got.indexOf("-n") + 1], QString("4"));
  QCOMPARE(got.contains("--allow-run-as-root"), geteuid() == 0);
  QCOMPARE(got.contains("--oversubscribe"), 4 > static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  // The worker's own vector comes last, whole.
  const QStringList tail = got.mid(got.indexOf("/opt/cs/bin/clusterscope-worker"));
  QCOMPARE(tail, (QStringList{"/opt/cs/bin/clusterscope-worker", "--dp", "4", "--out",
                              "/data/runs/r1.ranks/rank{rank}.db", "--title", "a run"}));
  // Every rank is told the run's id, which its store records.
  spec.run_id = "20261205T155901Z-3f9a2c1b";
  const auto with_id = worker_command(spec);
  const auto id_at = std::find(with_id.begin(), with_id.end(), "--run-id");
  QVERIFY(id_at != with_id.end());
  QCOMPARE(*(id_at + 1), spec.run_id);
  spec.run_id.clear();
  QCOMPARE(QString::fromStdString(rank_store_path(spec.run_store, 3)),
           QString("/data/runs/r1.ranks/rank3.db"));
  // The rank store folder's names read back (run --merge-only checks them
  // against the plan): a rank past an int is past every plan, not passed over.
  QCOMPARE(rank_of_store_file("rank3.db"), std::optional<int>(3));
  QCOMPARE(rank_of_store_file("rank12345678901.db"),
           std::optional<int>(std::numeric_limits<int>::max()));
  for (const char* other : {"rank.db", "rank3.db-wal", "rank-1.db", "notes.db", "rank3x.db"})
    QVERIFY2(!rank_of_store_file(other), other);
  QCOMPARE(QString::fromStdString(run_store_stem("/data/runs/r1.db")), QString("/data/runs/r1"));
  QCOMPARE(QString::fromStdString(run_store_stem("/data/runs/r1")), QString("/data/runs/r1"));

  spec.placement = Placement::hostfile;
  const auto with_hosts = mpirun_command(spec, "/data/runs/r1.hosts");
  const auto at = std::find(with_hosts.begin(), with_hosts.end(), "--hostfile");
  QVERIFY(at != with_hosts.end());
  QCOMPARE(QString::fromStdString(*(at + 1)), QString("/data/runs/r1.hosts"));
  QVERIFY(std::find(with_hosts.begin(), with_hosts.end(), "--oversubscribe") == with_hosts.end());
}

void TestLauncher::slurmScriptContent() {
  RunSpec spec;
  spec.worker = "/opt/cs/bin/clusterscope-worker";
  spec.worker_args = {"--plan", "/data/runs/r1.plan.json", "--dp", "8", "--tp", "2"};
  spec.ranks = 16;
  spec.run_store = "/data/runs/r1.db";
  spec.title = "GPT-2 124M on 16 ranks";
  spec.slurm.partition = "gpu";
  spec.slurm.account = "proj-42";
  spec.slurm.time_limit = "1:30:00";
  spec.slurm.nodes = 2;
  spec.slurm.cpus_per_task = 12;
  spec.slurm.after_command = {"/opt/cs/bin/clusterscope", "run", "--merge-only", "--out",
                              "/data/runs/r1.db"};
  auto script = slurm_script(spec);
  QVERIFY2(script.ok(), script.ok() ? "" : script.message().c_str());
  const QString text = QString::fromStdString(*script);
  const QStringList lines = text.split('\n');
  QCOMPARE(lines.first(), QString("#!/bin/bash"));
  for (const char* expected :
       {"#SBATCH --job-name=GPT-2_124M_on_16_ranks", "#SBATCH --ntasks=16", "#SBATCH --nodes=2",
        "#SBATCH --cpus-per-task=12", "#SBATCH --partition=gpu", "#SBATCH --account=proj-42",
        "#SBATCH --time=1:30:00", "#SBATCH --output=/data/runs/r1.slurm-%j.out",
        "mkdir -p /data/runs/r1.ranks",
        "srun --mpi=pmix --kill-on-bad-exit=1 /opt/cs/bin/clusterscope-worker --threads 12 --plan "
        "/data/runs/r1.plan.json --dp 8 --tp 2 --out '/data/runs/r1.ranks/rank{rank}.db' --title "
        "'GPT-2 124M on 16 ranks'",
        "status=$?", "/opt/cs/bin/clusterscope run --merge-only --out /data/runs/r1.db",
        "exit $status"}) {
    QVERIFY2(lines.contains(expected),
             qPrintable(QString("missing line: %1\nin:\n%2").arg(expected, text)));
  }
  // Every #SBATCH line comes before the first command, as sbatch requires.
  int last_directive = -1;
  int first_command = -1;
  for (int i = 1; i < lines.size(); ++i) {
    if (lines[i].startsWith("#SBATCH")) last_directive = i;
    if (first_command < 0 && !lines[i].isEmpty() && !lines[i].startsWith('#')) first_command = i;
  }
  QVERIFY(last_directive < first_command);
}

void TestLauncher::slurmScriptRefusesBadValues() {
  RunSpec spec;
  spec.worker = "/w";
  spec.slurm.partition = "gpu\n#SBATCH --uid=0";
  auto script = slurm_script(spec);
  QVERIFY(!script.ok());
  QVERIFY2(QString::fromStdString(script.message()).contains("Slurm partition"),
           script.message().c_str());
  spec.slurm.partition.clear();
  spec.run_store = "/data/my runs/r1.db";
  script = slurm_script(spec);
  QVERIFY(!script.ok());
  QVERIFY2(QString::fromStdString(script.message()).contains("output path"),
           script.message().c_str());
}

// The script run by the real bash, with srun being a program that writes the
// arguments it receives: they must be exactly the worker's vector, and
// nothing in the hostile title may run.
void TestLauncher::slurmScriptQuotesEveryValue() {
  const QString bin = dir_.filePath("fake-bin");
  QVERIFY(QDir().mkpath(bin));
  QVERIFY(
      write_text(bin + "/srun",
                 "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"$SRUN_ARGS\"\n"));
  QVERIFY(
      QFile::setPermissions(bin + "/srun", QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
  const QString work = dir_.filePath("slurm-quoting");
  QVERIFY(QDir().mkpath(work));

  RunSpec spec;
  spec.worker = "/opt/cs/bin/clusterscope-worker";
  spec.title = QString(kHostile).arg(work).toStdString();
  spec.worker_args = {"--plan", (work + "/it's a plan.json").toStdString(), "--lr", "1e-3"};
  spec.ranks = 2;
  spec.run_store = (work + "/run.db").toStdString();
  auto script = slurm_script(spec);
  QVERIFY2(script.ok(), script.ok() ? "" : script.message().c_str());
  QVERIFY(write_text(work + "/job.sbatch", QByteArray::fromStdString(*script)));

  QProcess bash;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("PATH", bin + ":/usr/bin:/bin");
  env.insert("SRUN_ARGS", work + "/srun-args.txt");
  bash.setProcessEnvironment(env);
  bash.setWorkingDirectory(work);
  bash.start("/bin/bash", {work + "/job.sbatch"});
  QVERIFY(bash.waitForFinished(10000));
  QCOMPARE(bash.exitCode(), 0);

  QFile args(work + "/srun-args.txt");
  QVERIFY(args.open(QIODevice::ReadOnly));
  QStringList received = QString::fromUtf8(args.readAll()).split('\n');
  received.removeLast();  // after the final newline
  QStringList expected{"--mpi=pmix", "--kill-on-bad-exit=1"};
  for (const std::string& a : worker_command(spec))
    expected << QString::fromStdString(a);
  QCOMPARE(received, expected);
  for (const char* f : {"pwned-a", "pwned-b", "pwned-c", "pwned-d"}) {
    QVERIFY2(!QFile::exists(work + "/" + f), f);
  }
  QVERIFY(QDir(work + "/run.ranks").exists());
}

void TestLauncher::slurmWithoutSbatchWritesTheScript() {
  const QString work = dir_.filePath("slurm-no-sbatch");
  QVERIFY(QDir().mkpath(work));
  RunSpec spec;
  spec.worker = CS_BIN_DIR "/clusterscope-worker";
  spec.ranks = 2;
  spec.placement = Placement::slurm;
  spec.run_store = (work + "/run.db").toStdString();
  if (find_program("sbatch"))
    QSKIP("sbatch is installed here: this checks the machines without Slurm");
  Launcher launcher(spec);
  QVERIFY(launcher.start().ok());
  const RunReport r = launcher.wait();
  QCOMPARE(r.outcome, Outcome::script_only);
  QCOMPARE(QString::fromStdString(r.slurm_script), work + "/run.sbatch");
  QVERIFY2(QString::fromStdString(r.message).contains(QString::fromStdString(
               "sbatch is not on PATH: wrote the batch script " + r.slurm_script)),
           r.message.c_str());
  QFile script(work + "/run.sbatch");
  QVERIFY(script.open(QIODevice::ReadOnly));
  QVERIFY(script.readAll().contains("#SBATCH --ntasks=2"));
  QVERIFY(QFileInfo(script).permissions() & QFile::ExeOwner);
}

// A real run with a title built to run commands through any shell: the
// worker gets it as one argument, and nothing runs.
void TestLauncher::hostileTitleRunsNothing() {
  const QString work = dir_.filePath("hostile-title");
  QVERIFY(QDir().mkpath(work));
  std::vector<std::string> args = test::tiny_model_args();
  args.insert(args.end(), {"--steps", "2"});
  RunSpec spec = test::worker_spec(1, args);
  spec.title = QString(kHostile).arg(work).toStdString();
  Launcher launcher(spec);
  QVERIFY(launcher.start().ok());
  const RunReport r = launcher.wait();
  QVERIFY2(r.outcome == Outcome::completed, qPrintable(describe(r)));
  QCOMPARE(r.command.back(), spec.title);
  for (const char* f : {"pwned-a", "pwned-b", "pwned-c", "pwned-d"}) {
    QVERIFY2(!QFile::exists(work + "/" + f), f);
  }
}

void TestLauncher::hostileHostfileRunsNothing() {
  const QString work = dir_.filePath("hostile-hosts");
  QVERIFY(QDir().mkpath(work));
  const QString hostfile = work + "/hosts";
  QVERIFY(write_text(
      hostfile,
      QString("localhost slots=1\nlocalhost;touch %1/pwned slots=1\n").arg(work).toUtf8()));
  RunSpec spec = endless_run(2);
  spec.placement = Placement::hostfile;
  spec.hostfile = hostfile.toStdString();
  Launcher launcher(spec);
  const Status s = launcher.start();
  QVERIFY(!s.ok());
  QVERIFY2(QString::fromStdString(s.message())
               .startsWith(hostfile + ":2: \"localhost;touch\" is not a host name"),
           s.message().c_str());
  QVERIFY(!QFile::exists(work + "/pwned"));
}

void TestLauncher::hostfileRunOnThisMachine() {
  const QString work = dir_.filePath("hostfile-local");
  QVERIFY(QDir().mkpath(work));
  QVERIFY(write_text(work + "/hosts", "# this machine\nlocalhost slots=2\n"));
  std::vector<std::string> args = test::tiny_model_args();
  args.insert(args.end(), {"--steps", "3", "--dp", "2"});
  RunSpec spec = test::worker_spec(2, args);
  spec.placement = Placement::hostfile;
  spec.hostfile = (work + "/hosts").toStdString();
  spec.run_store = (work + "/run.db").toStdString();
  spec.worker_args.push_back("--no-trace");
  const auto run = test::run_worker(spec);
  QVERIFY2(run.report.outcome == Outcome::completed, qPrintable(describe(run.report)));
  QCOMPARE(run.losses.at(0).size(), std::size_t{3});
  QCOMPARE(run.losses.at(1), run.losses.at(0));
  // mpirun read the validated copy.
  const auto at = std::find(run.report.command.begin(), run.report.command.end(), "--hostfile");
  QVERIFY(at != run.report.command.end());
  QCOMPARE(QString::fromStdString(*(at + 1)), work + "/run.hosts");
}

void TestLauncher::hostfileTooFewSlots() {
  const QString hostfile = dir_.filePath("small-hosts");
  QVERIFY(write_text(hostfile, "n1 slots=2\nn2\n"));
  RunSpec spec = endless_run(4);
  spec.placement = Placement::hostfile;
  spec.hostfile = hostfile.toStdString();
  Launcher launcher(spec);
  const Status s = launcher.start();
  QVERIFY(!s.ok());
  QCOMPARE(
      QString::fromStdString(s.message()),
      hostfile +
          ": lists 3 slots on 2 hosts, but the run needs 4 ranks (add slots=N to the host lines)");
}

void TestLauncher::unreachableHostIsReported() {
  const QString hostfile = dir_.filePath("unreachable-hosts");
  QVERIFY(write_text(hostfile, "no-such-node.invalid slots=2\n"));
  RunSpec spec = endless_run(2);
  spec.placement = Placement::hostfile;
  spec.hostfile = hostfile.toStdString();
  Launcher launcher(spec);
  QVERIFY(launcher.start().ok());
  const RunReport r = launcher.wait();
  QCOMPARE(r.outcome, Outcome::failed);
  QVERIFY(r.exit_status != 0);
  QVERIFY2(QString::fromStdString(r.message).contains("before any rank started"),
           qPrintable(describe(r)));
  QVERIFY2(QString::fromStdString(r.message).contains("no-such-node"), qPrintable(describe(r)));
  // Without a run store the validated copy went to the temporary folder;
  // it is gone once the run has ended.
  const auto at = std::find(r.command.begin(), r.command.end(), "--hostfile");
  QVERIFY(at != r.command.end() && at + 1 != r.command.end());
  QVERIFY2(QString::fromStdString(*(at + 1)).startsWith(QDir::tempPath() + "/clusterscope-"),
           (at + 1)->c_str());
  QVERIFY2(!QFile::exists(QString::fromStdString(*(at + 1))), (at + 1)->c_str());
}

void TestLauncher::missingWorkerOrMpirun() {
  RunSpec spec = endless_run(1);
  spec.worker = "/nonexistent/clusterscope-worker";
  Launcher a(spec);
  Status s = a.start();
  QVERIFY(!s.ok());
  QCOMPARE(QString::fromStdString(s.message()),
           QString("/nonexistent/clusterscope-worker: the worker is not an executable file"));
  spec = endless_run(1);
  spec.mpirun = "mpirun-that-is-not-installed";
  Launcher b(spec);
  s = b.start();
  QVERIFY(!s.ok());
  QVERIFY2(
      QString::fromStdString(s.message()).startsWith("mpirun-that-is-not-installed: not found"),
      s.message().c_str());
  // With a run store: refused before its rank store folder is made (an
  // empty RUN.ranks was left behind).
  QTemporaryDir stores;
  spec.run_store = stores.filePath("run.db").toStdString();
  Launcher b2(spec);
  s = b2.start();
  QVERIFY(!s.ok());
  QVERIFY2(
      QString::fromStdString(s.message()).startsWith("mpirun-that-is-not-installed: not found"),
      s.message().c_str());
  QVERIFY(!QFileInfo::exists(stores.filePath("run.ranks")));
  // A run store where a folder is: refused before any rank runs (the run
  // trained to its end, then kept no store).
  QTemporaryDir dir;
  spec = endless_run(1);
  spec.run_store = dir.path().toStdString();
  Launcher c(spec);
  s = c.start();
  QVERIFY(!s.ok());
  QVERIFY2(QString::fromStdString(s.message()).startsWith(dir.path() + ": is a folder"),
           s.message().c_str());
  QVERIFY(!QFileInfo::exists(dir.path() + ".ranks"));
}

void TestLauncher::failingRankIsNamed_data() {
  QTest::addColumn<QStringList>("flags");
  QTest::addColumn<QString>("message");
  QTest::addColumn<QString>("last_line");
  // The worker reports the error itself, then ends the job with MPI_Abort.
  QTest::addRow("error line") << QStringList{"--global-batch", "3"}
                              << "failed: --global-batch 3 must be a multiple of dp x micro-batch = 2"
                              << "";
  QTest::addRow("refused precision") << QStringList{"--precision", "fp8"}
                                     << "failed: the CPU engine computes in fp32 or bf16, not fp8"
                                     << "";
  // Refused by the argument parser before MPI starts: only the exit status
  // and stderr tell.
  QTest::addRow("exit status") << QStringList{"--zero", "4"} << "exited with status"
                               << "--zero";
}

void TestLauncher::failingRankIsNamed() {
  QFETCH(QStringList, flags);
  QFETCH(QString, message);
  QFETCH(QString, last_line);
  RunSpec spec = endless_run(2);
  for (const QString& f : flags)
    spec.worker_args.push_back(f.toStdString());
  Launcher launcher(spec);
  QVERIFY(launcher.start().ok());
  const RunReport r = launcher.wait();
  QVERIFY2(r.outcome == Outcome::failed || r.outcome == Outcome::crashed, qPrintable(describe(r)));
  QVERIFY2(r.failure, qPrintable(describe(r)));
  QVERIFY(r.failure->rank == 0 || r.failure->rank == 1);
  QVERIFY2(QString::fromStdString(r.message).contains(message), qPrintable(describe(r)));
  if (!last_line.isEmpty()) {
    QStringList lines;
    for (const std::string& l : r.failure->last_lines)
      lines << QString::fromStdString(l);
    const bool named = std::any_of(lines.begin(), lines.end(),
                                   [&](const QString& l) { return l.contains(last_line); });
    QVERIFY2(named, qPrintable(lines.join('\n')));
  }
}

// SIGKILL to mpirun itself: no rank says how it ended, and none is left
// "running" in the report (the run table showed them so after the job).
void TestLauncher::ranksOfAKilledJobAreLost() {
  RunSpec spec = endless_run(2, dir_.filePath("mpirun-killed/run.db"));
  Launcher launcher(spec);
  QVERIFY(launcher.start().ok());
  QVERIFY2(test::wait_until([&] { return every_rank_reached(launcher, 2); }, 30s), "no progress");
  const pid_t mpirun = parent_of(launcher.ranks()[0].pid);
  QVERIFY(mpirun > 1);
  QCOMPARE(::kill(mpirun, SIGKILL), 0);
  const RunReport r = launcher.wait();
  QVERIFY2(r.outcome == Outcome::crashed, qPrintable(describe(r)));
  // Said as a signal, not as "exited with status 137".
  QVERIFY2(r.message.find(" was killed by signal 9 (Killed) before every rank finished") !=
               std::string::npos,
           r.message.c_str());
  for (const RankStatus& s : r.ranks) {
    QVERIFY2(s.state != RankState::running && s.state != RankState::starting,
             qPrintable(QString("rank %1 is %2").arg(s.rank).arg(to_string(s.state).data())));
  }
  // The ranks mpirun left running closed their stores before the merge: it
  // merged while they wrote, and lost their last steps.
  const StoreView run = view_store(spec.run_store);
  QVERIFY2(run.error.empty(), run.error.c_str());
  for (int rank = 0; rank < 2; ++rank) {
    const StoreView own = view_store(rank_store_path(spec.run_store, rank));
    QVERIFY2(own.error.empty(), own.error.c_str());
    QCOMPARE(QString::fromStdString(own.status), QString("cancelled"));
    QCOMPARE(run.steps_of(rank), own.steps_of(rank));
    QCOMPARE(run.events_of(rank), own.events_of(rank));
  }
}

// SIGKILL to one worker mid-run: the launcher names that rank and how it ended.
void TestLauncher::killedRankIsNamed() {
  RunSpec spec = endless_run(2, dir_.filePath("killed/run.db"));
  Launcher launcher(spec);
  QVERIFY(launcher.start().ok());
  QVERIFY2(test::wait_until([&] { return every_rank_reached(launcher, 2); }, 30s), "no progress");
  // Until the victim's writer has committed rows (every 500 ms).
  QVERIFY(test::wait_until(
      [&] {
        auto state = trace::inspect_store(rank_store_path(spec.run_store, 1));
        return state.ok() && state->events > 0;
      },
      10s));
  const std::int64_t victim = launcher.ranks()[1].pid;
  QVERIFY(victim > 0);
  QCOMPARE(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  const RunReport r = launcher.wait();
  QCOMPARE(r.outcome, Outcome::crashed);
  QVERIFY2(r.failure, qPrintable(describe(r)));
  QCOMPARE(r.failure->rank, 1);
  QCOMPARE(r.failure->signal, SIGKILL);
  QCOMPARE(r.failure->pid, victim);
  QVERIFY2(QString::fromStdString(r.message).startsWith("rank 1 on "), r.message.c_str());
  QVERIFY2(QString::fromStdString(r.message).contains("killed by signal 9"), r.message.c_str());
  QCOMPARE(r.ranks[1].state, RankState::failed);
  QVERIFY(r.ranks[0].state != RankState::failed);
  QVERIFY(r.ranks[0].step >= 2);

  // The survivor closed its store on mpirun's SIGTERM; the killed rank's
  // store keeps what it had committed; the run store holds both, marked crashed.
  const StoreView survivor = view_store(rank_store_path(spec.run_store, 0));
  QVERIFY2(survivor.error.empty(), survivor.error.c_str());
  QCOMPARE(QString::fromStdString(survivor.status), QString("cancelled"));
  QVERIFY(survivor.steps_in_order);
  QVERIFY(survivor.steps_of(0) >= r.ranks[0].step + 1);
  const StoreView killed = view_store(rank_store_path(spec.run_store, 1));
  QVERIFY2(killed.error.empty(), killed.error.c_str());
  QCOMPARE(QString::fromStdString(killed.status), QString("interrupted"));
  QVERIFY(killed.steps_in_order);
  QVERIFY(killed.events_of(1) > 0);
  QVERIFY2(!r.run_store.empty(), r.merge_note.c_str());
  const StoreView run = view_store(spec.run_store);
  QVERIFY2(run.error.empty(), run.error.c_str());
  QCOMPARE(QString::fromStdString(run.status), QString("crashed"));
  QCOMPARE(run.steps_of(0), survivor.steps_of(0));
  QCOMPARE(run.steps_of(1), killed.steps_of(1));
}

// A calibration's ranks sweep instead of training, and say so with
// sweep_start: their host and pid are known as a training rank's are (they
// were not, and a stop or a kill reached mpirun alone), and a cancel stops
// them at once.
void TestLauncher::sweepRanksAreKnown() {
  // GEMMs of width 1024: each size's repetitions take seconds (of width 64,
  // at most 200 of them, the whole sweep took 0.4 s and a rank could be done
  // before the other's pid was known).
  RunSpec spec =
      test::worker_spec(2, {"--backend", "cpu", "--sweep", "layer_gemm", "--sweep-seconds", "60",
                            "--gemm-sizes", "1024", "--dp", "2"});
  Launcher launcher(spec);
  QVERIFY(launcher.start().ok());
  QVERIFY2(test::wait_until(
               [&] {
                 const std::vector<RankStatus> ranks = launcher.ranks();
                 return std::all_of(ranks.begin(), ranks.end(),
                                    [](const RankStatus& r) { return r.pid > 0; });
               },
               30s),
           "no rank's pid");
  for (const RankStatus& r : launcher.ranks()) {
    QCOMPARE(r.state, RankState::running);
    QVERIFY(!r.host.empty());
    // The pid is the worker's own.
    std::ifstream cmdline("/proc/" + std::to_string(r.pid) + "/cmdline");
    std::string program;
    std::getline(cmdline, program, '\0');
    QVERIFY2(program.ends_with("clusterscope-worker"), program.c_str());
  }
  launcher.cancel();
  const RunReport r = launcher.wait();
  QCOMPARE(r.outcome, Outcome::cancelled);
}

// A rank killed (kill -9) as the run is cancelled lost what it had not
// committed: the run crashed, though a cancel was asked (it was reported,
// and its store marked, as cancelled).
void TestLauncher::rankKilledDuringACancelIsACrash() {
  RunSpec spec = endless_run(2, dir_.filePath("killed-in-cancel/run.db"));
  spec.kill_grace = 20s;
  Launcher launcher(spec, {});
  QVERIFY(launcher.start().ok());
  QVERIFY2(test::wait_until([&] { return every_rank_reached(launcher, 2); }, 30s), "no progress");
  const std::int64_t victim = launcher.ranks()[1].pid;
  QCOMPARE(::kill(static_cast<pid_t>(victim), SIGKILL), 0);
  launcher.cancel();
  const RunReport r = launcher.wait();
  QCOMPARE(r.outcome, Outcome::crashed);
  QVERIFY(r.failure);
  QCOMPARE(r.failure->rank, 1);
  QCOMPARE(r.failure->signal, SIGKILL);
  const StoreView run = view_store(spec.run_store);
  QVERIFY2(run.error.empty(), run.error.c_str());
  QCOMPARE(QString::fromStdString(run.status), QString("crashed"));
}

void TestLauncher::cancelStopsEveryRank() {
  RunSpec spec = endless_run(2, dir_.filePath("cancelled/run.db"));
  spec.kill_grace = 20s;
  std::atomic<int> stopping{0};
  Launcher launcher(spec, [&](const LaunchEvent& e) {
    if (e.kind == LaunchEvent::Kind::stopping) ++stopping;
  });
  QVERIFY(launcher.start().ok());
  QVERIFY2(test::wait_until([&] { return every_rank_reached(launcher, 2); }, 30s), "no progress");
  launcher.cancel();
  const RunReport r = launcher.wait();
  QCOMPARE(r.outcome, Outcome::cancelled);
  QCOMPARE(stopping.load(), 1);
  QVERIFY(!r.failure);
  QVERIFY2(QString::fromStdString(r.message).contains(" by rank 0"), r.message.c_str());
  // Every rank said it had closed its store (before the job was ended).
  for (const RankStatus& s : r.ranks) {
    QCOMPARE(s.state, RankState::cancelled);
    QVERIFY(s.step >= 2);
  }

  // Every rank closed its store as cancelled, holding every step it had
  // reported; the run store holds them all, marked cancelled.
  const StoreView run = view_store(spec.run_store);
  QVERIFY2(run.error.empty(), run.error.c_str());
  QCOMPARE(QString::fromStdString(run.status), QString("cancelled"));
  for (const RankStatus& s : r.ranks) {
    const StoreView rank = view_store(rank_store_path(spec.run_store, s.rank));
    QVERIFY2(rank.error.empty(), rank.error.c_str());
    QCOMPARE(QString::fromStdString(rank.status), QString("cancelled"));
    QVERIFY(rank.steps_in_order);
    QVERIFY2(rank.steps_of(s.rank) >= s.step + 1,
             qPrintable(QString("rank %1 reported step %2, its store holds %3 steps")
                            .arg(s.rank)
                            .arg(s.step)
                            .arg(rank.steps_of(s.rank))));
    QCOMPARE(run.steps_of(s.rank), rank.steps_of(s.rank));
    QCOMPARE(run.events_of(s.rank), rank.events_of(s.rank));
  }
}

// mpirun stopped (SIGSTOP, a debugger attached): it relays no output, so
// the run hangs; the message names it, and the ranks close their stores
// (the launcher continues mpirun and tells the ranks on this host itself).
// It was said to be a hang of no one, and the ranks' stores stayed open
// until SIGKILL.
void TestLauncher::stoppedMpirunIsNamed() {
  RunSpec spec = endless_run(2, dir_.filePath("mpirun-stopped/run.db"));
  spec.hang_timeout = 1500ms;
  spec.kill_grace = 60s;
  HungText hung;
  Launcher launcher(spec, hung.watch());
  QVERIFY(launcher.start().ok());
  QVERIFY2(test::wait_until([&] { return every_rank_reached(launcher, 2); }, 30s), "no progress");
  const pid_t mpirun = parent_of(launcher.ranks()[0].pid);
  QVERIFY(mpirun > 1);
  QCOMPARE(::kill(mpirun, SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  const RunReport r = launcher.wait();
  ::kill(mpirun, SIGCONT);  // in case it outlived the run
  QVERIFY2(std::chrono::steady_clock::now() - stopped_at < 30s,
           "the launcher waited out the grace: the ranks did not close their stores");
  QCOMPARE(r.outcome, Outcome::hung);
  {
    const QString text = hung.get();
    QVERIFY2(text.contains(QString("; %1 (pid %2) is stopped (SIGSTOP or a debugger)")
                               .arg(QString::fromStdString(spec.mpirun))
                               .arg(mpirun)),
             qPrintable(text));
  }
  for (int rank = 0; rank < 2; ++rank) {
    const StoreView own = view_store(rank_store_path(spec.run_store, rank));
    QVERIFY2(own.error.empty(), own.error.c_str());
    QCOMPARE(QString::fromStdString(own.status), QString("cancelled"));
  }
}

// A rank stopped before it said it had started (here: before its worker
// even ran) has told the launcher no pid. The hang is seen after the
// start-up patience, and both the message and the report say that patience
// and name the rank, found among mpirun's processes. The report said "no
// progress for" the hang timeout, and named no one.
void TestLauncher::rankStoppedBeforeItStartedIsNamed() {
  const QString folder = dir_.filePath("stopped-before-start");
  QVERIFY(QDir().mkpath(folder));
  const QString wrapper = folder + "/clusterscope-worker";
  {
    QFile script(wrapper);
    QVERIFY(script.open(QIODevice::WriteOnly));
    script.write(QString("#!/bin/sh\n"
                         "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then kill -STOP $$; fi\n"
                         "exec '%1' \"$@\"\n")
                     .arg(CS_BIN_DIR "/clusterscope-worker")
                     .toUtf8());
    script.close();
    QVERIFY(script.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
  }
  RunSpec spec = endless_run(2);
  spec.worker = wrapper.toStdString();
  spec.hang_timeout = 1s;
  spec.startup_timeout = 3s;
  spec.kill_grace = 2s;
  HungText hung;
  Launcher launcher(spec, hung.watch());
  QVERIFY(launcher.start().ok());
  const RunReport r = launcher.wait();
  QCOMPARE(r.outcome, Outcome::hung);
  const QRegularExpression named(
      "; rank 1 \\(" + QRegularExpression::escape(QString::fromStdString(this_host_name())) +
      ", pid \\d+\\), not yet started, is stopped \\(SIGSTOP or a debugger\\)$");
  {
    const QString text = hung.get();
    QVERIFY2(text.startsWith("no progress for 3 s; steps done: "), qPrintable(text));
    QVERIFY2(text.contains("rank 1 not started"), qPrintable(text));
    QVERIFY2(named.match(text).hasMatch(), qPrintable(text));
  }
  QVERIFY2(QString::fromStdString(r.message).startsWith("the run hung (no progress for 3 s)"),
           r.message.c_str());
  QVERIFY2(named.match(QString::fromStdString(r.message)).hasMatch(), r.message.c_str());
}

// One rank stopped (SIGSTOP) stalls the others in their collectives: no
// progress anywhere, and the launcher stops the run as hung.
void TestLauncher::hungRunIsStopped() {
  RunSpec spec = endless_run(2, dir_.filePath("hung/run.db"));
  spec.hang_timeout = 1500ms;
  // The stopped rank is continued by the launcher and closes its store at
  // once: the run must not wait this out (it ended after the whole grace
  // when only mpirun's SIGTERM continued the rank).
  spec.kill_grace = 60s;
  HungText hung;
  Launcher launcher(spec, hung.watch());
  QVERIFY(launcher.start().ok());
  QVERIFY2(test::wait_until([&] { return every_rank_reached(launcher, 2); }, 30s), "no progress");
  QTest::qWait(1000);  // a rank commits its store every half second
  const std::int64_t stopped = launcher.ranks()[1].pid;
  QCOMPARE(::kill(static_cast<pid_t>(stopped), SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  const RunReport r = launcher.wait();
  QVERIFY2(std::chrono::steady_clock::now() - stopped_at < 30s,
           "the launcher waited out the grace: the stopped rank did not close its store");
  ::kill(static_cast<pid_t>(stopped), SIGCONT);  // in case it outlived the run
  QCOMPARE(r.outcome, Outcome::hung);
  {
    const QString text = hung.get();
    QVERIFY2(
        text.contains(QRegularExpression("^no progress for 1.5 s; steps done: \\d+ by rank 0, ")),
        qPrintable(text));
    // Which rank hangs the run: the one the system holds stopped, with its
    // host, pid and the last op its store held.
    QVERIFY2(text.contains(QString("; rank 1 (%1, pid %2) is stopped (SIGSTOP or a debugger); its "
                                   "last recorded op: ")
                               .arg(QString::fromStdString(this_host_name()))
                               .arg(stopped)),
             qPrintable(text));
  }
  // A count of the steps done (the timeline numbers them from 0, the progress
  // lines from 1: a step's number read differently in each).
  QVERIFY2(QString::fromStdString(r.message).contains(
               QString::fromStdString(std::to_string(r.ranks[1].step + 1) + " by rank 1")),
           r.message.c_str());
  QVERIFY2(QString::fromStdString(r.message).contains("rank 1 (") &&
               QString::fromStdString(r.message).contains("is stopped"),
           r.message.c_str());
  QCOMPARE(r.hung_ranks.size(), std::size_t{1});
  QCOMPARE(r.hung_ranks[0].rank, 1);
  QCOMPARE(r.hung_ranks[0].pid, stopped);
  QVERIFY(!r.hung_ranks[0].last_op.empty());
  // The stopped rank got SIGCONT from the launcher, closed its store like
  // the other (it said so) and ended.
  QVERIFY(test::wait_until([&] { return ::kill(static_cast<pid_t>(stopped), 0) != 0; }, 5s));
  for (const RankStatus& st : r.ranks) {
    QVERIFY2(st.state == RankState::cancelled,
             qPrintable(QString("rank %1: %2")
                            .arg(st.rank)
                            .arg(QString::fromStdString(std::string(to_string(st.state))))));
  }
  const StoreView run = view_store(spec.run_store);
  QVERIFY2(run.error.empty(), run.error.c_str());
  QCOMPARE(QString::fromStdString(run.status), QString("hung"));
  for (const RankStatus& st : r.ranks) {
    QVERIFY2(run.steps_of(st.rank) >= st.step + 1,
             qPrintable(QString("rank %1 reported step %2, its store holds %3 steps (rank state %4)")
                            .arg(st.rank)
                            .arg(st.step)
                            .arg(run.steps_of(st.rank))
                            .arg(int(st.state))));
  }
}

// A step skipped for overflowed FP16 gradients (the CUDA engine's loss
// scaling) has no finite gradient norm: the worker's line says null. It is a
// step all the same, counted and passed on, its norm NaN; the launcher took
// the line for text, and a run whose last steps were skipped read as short.
void TestLauncher::skippedStepIsAStep() {
  const QString folder = dir_.filePath("skipped-step");
  QVERIFY(QDir().mkpath(folder));
  const QString worker = folder + "/clusterscope-worker";
  {
    QFile script(worker);
    QVERIFY(script.open(QIODevice::WriteOnly));
    // Lines as the worker writes them (nlohmann writes an infinity as null).
    script.write(
        "#!/bin/sh\n"
        "echo '{\"event\":\"start\",\"rank\":0,\"host\":\"h\",\"pid\":'$$',\"steps\":2,"
        "\"store\":\"\"}'\n"
        "echo '{\"event\":\"step\",\"rank\":0,\"step\":0,\"steps\":2,\"loss\":5.5,"
        "\"grad_norm\":2.5,\"loss_scale\":65536.0,\"step_seconds\":0.1,\"cpu_seconds\":0.1,"
        "\"tokens_per_second\":10.0,\"memory_bytes\":1}'\n"
        "echo '{\"event\":\"step\",\"rank\":0,\"step\":1,\"steps\":2,\"loss\":5.4,"
        "\"grad_norm\":null,\"loss_scale\":131072.0,\"skipped\":true,\"step_seconds\":0.1,"
        "\"cpu_seconds\":0.1,\"tokens_per_second\":10.0,\"memory_bytes\":1}'\n"
        "echo '{\"event\":\"done\",\"rank\":0,\"store\":\"\"}'\n");
    script.close();
    QVERIFY(script.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
  }
  RunSpec spec = test::worker_spec(1, {});
  spec.worker = worker.toStdString();
  std::vector<LaunchEvent> steps;
  std::mutex mutex;
  Launcher launcher(spec, [&](const LaunchEvent& e) {
    std::lock_guard lock(mutex);
    if (e.kind == LaunchEvent::Kind::step) steps.push_back(e);
  });
  QVERIFY(launcher.start().ok());
  const RunReport r = launcher.wait();
  QVERIFY2(r.outcome == Outcome::completed, qPrintable(describe(r)));
  QCOMPARE(static_cast<int>(steps.size()), 2);
  QCOMPARE(steps[0].grad_norm, 2.5);
  QCOMPARE(steps[1].step, 1);
  QCOMPARE(steps[1].loss, 5.4);
  QVERIFY(std::isnan(steps[1].grad_norm));
  QCOMPARE(r.ranks.at(0).step, 1);
  QVERIFY(r.ranks.at(0).last_lines.empty());
}

QTEST_GUILESS_MAIN(TestLauncher)
#include "tst_launcher.moc"
