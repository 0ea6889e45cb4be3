#include "profiler/launch_env.h"

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <random>
#include <vector>

#include "core/parse_count.h"

extern char** environ;

namespace cs::profiler {

namespace {

std::optional<std::string_view> lookup(const Environment& env, std::string_view name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return std::string_view(it->second);
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

// A non-negative decimal integer that fits an int (spaces around it
// allowed, as Slurm's variables may carry them), or nothing.
std::optional<int> parse_count(std::string_view text) {
  return cs::parse_count(trim(text));
}

// Reads one variable as a non-negative integer; absent gives nothing, anything
// else that is not such a number is an error naming the variable.
Result<std::optional<int>> read_int(const Environment& env, std::string_view name) {
  auto text = lookup(env, name);
  if (!text) return std::optional<int>{};
  if (auto value = parse_count(*text)) return std::optional<int>{*value};
  return Error{std::string(name) + "=\"" + std::string(*text) +
               "\" is not a non-negative whole number"};
}

// Reads variables as non-negative integers, keeping the first error.
class Reader {
 public:
  explicit Reader(const Environment& env) : env_(env) {}

  std::optional<int> get(std::string_view name) {
    if (error_) return std::nullopt;
    auto value = read_int(env_, name);
    if (!value) {
      error_ = value.error();
      return std::nullopt;
    }
    return *value;
  }
  // The first of `names` that is set; `which` learns its name.
  std::optional<int> first_of(std::initializer_list<std::string_view> names,
                              std::string_view& which) {
    for (std::string_view name : names) {
      if (auto value = get(name)) {
        which = name;
        return value;
      }
    }
    return std::nullopt;
  }
  const std::optional<Error>& error() const { return error_; }

 private:
  const Environment& env_;
  std::optional<Error> error_;
};

struct Names {
  std::string_view rank, size, local_rank, local_size, node;
};

// Checks the ranges every launcher must respect, naming the variables.
Status check_ranges(const LaunchEnv& e, const Names& n) {
  if (e.world_size < 1) {
    return Error{std::string(n.size) + "=" + std::to_string(e.world_size) + " must be at least 1"};
  }
  if (e.rank >= e.world_size) {
    return Error{std::string(n.rank) + "=" + std::to_string(e.rank) + " is not below " +
                 std::string(n.size) + "=" + std::to_string(e.world_size)};
  }
  if (e.local_world_size) {
    if (*e.local_world_size < 1) {
      return Error{std::string(n.local_size) + "=" + std::to_string(*e.local_world_size) +
                   " must be at least 1"};
    }
    if (*e.local_world_size > e.world_size) {
      return Error{std::string(n.local_size) + "=" + std::to_string(*e.local_world_size) +
                   " is larger than " + std::string(n.size) + "=" + std::to_string(e.world_size)};
    }
    if (e.local_rank >= *e.local_world_size) {
      return Error{std::string(n.local_rank) + "=" + std::to_string(e.local_rank) +
                   " is not below " + std::string(n.local_size) + "=" +
                   std::to_string(*e.local_world_size)};
    }
  } else if (e.local_rank >= e.world_size) {
    return Error{std::string(n.local_rank) + "=" + std::to_string(e.local_rank) + " is not below " +
                 std::string(n.size) + "=" + std::to_string(e.world_size)};
  }
  return {};
}

Result<LaunchEnv> from_torchrun(const Environment& env) {
  Reader read(env);
  const auto rank = read.get("RANK");
  const auto size = read.get("WORLD_SIZE");
  const auto local_rank = read.get("LOCAL_RANK");
  const auto local_size = read.get("LOCAL_WORLD_SIZE");
  const auto group = read.get("GROUP_RANK");
  if (read.error()) return *read.error();
  if (!rank) return Error{"WORLD_SIZE is set but RANK is not (torchrun sets both)"};
  if (!size) return Error{"RANK is set but WORLD_SIZE is not (torchrun sets both)"};
  if (!local_rank)
    return Error{"RANK and WORLD_SIZE are set but LOCAL_RANK is not (torchrun sets all three)"};
  LaunchEnv e;
  e.launcher = Launcher::torchrun;
  e.rank = *rank;
  e.world_size = *size;
  e.local_rank = *local_rank;
  e.local_world_size = local_size;
  e.node_rank = group;
  if (Status s =
          check_ranges(e, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"});
      !s) {
    return s.error();
  }
  return e;
}

Result<LaunchEnv> from_open_mpi(const Environment& env) {
  Reader read(env);
  const auto rank = read.get("OMPI_COMM_WORLD_RANK");
  const auto size = read.get("OMPI_COMM_WORLD_SIZE");
  const auto local_rank = read.get("OMPI_COMM_WORLD_LOCAL_RANK");
  const auto local_size = read.get("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (read.error()) return *read.error();
  if (!rank) return Error{"OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"};
  if (!size) return Error{"OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not"};
  if (!local_rank)
    return Error{"OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_LOCAL_RANK is not"};
  LaunchEnv e;
  e.launcher = Launcher::open_mpi;
  e.rank = *rank;
  e.world_size = *size;
  e.local_rank = *local_rank;
  e.local_world_size = local_size;
  if (Status s = check_ranges(e, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", ""});
      !s) {
    return s.error();
  }
  return e;
}

Result<LaunchEnv> from_pmi(const Environment& env) {
  Reader read(env);
  std::string_view local_rank_name = "MPI_LOCALRANKID";
  const auto rank = read.get("PMI_RANK");
  const auto size = read.get("PMI_SIZE");
  const auto local_rank = read.first_of({"MPI_LOCALRANKID", "SLURM_LOCALID"}, local_rank_name);
  const auto local_size = read.get("MPI_LOCALNRANKS");
  if (read.error()) return *read.error();
  if (!rank) return Error{"PMI_SIZE is set but PMI_RANK is not"};
  if (!size) return Error{"PMI_RANK is set but PMI_SIZE is not"};
  if (!local_rank) {
    return Error{
        "PMI_RANK is set but no local rank is (MPI_LOCALRANKID from hydra, or SLURM_LOCALID from "
        "srun)"};
  }
  LaunchEnv e;
  e.launcher = Launcher::pmi;
  e.rank = *rank;
  e.world_size = *size;
  e.local_rank = *local_rank;
  e.local_world_size = local_size;
  if (Status s = check_ranges(e, {"PMI_RANK", "PMI_SIZE", local_rank_name, "MPI_LOCALNRANKS", ""});
      !s) {
    return s.error();
  }
  return e;
}

// SLURM_TASKS_PER_NODE / SLURM_STEP_TASKS_PER_NODE: "2(x3),1" means nodes 0-2
// run 2 tasks each and node 3 runs 1. Returns the count of node `node`.
Result<int> slurm_tasks_on_node(std::string_view spec, int node, std::string_view name) {
  auto bad = [&] {
    return Error{std::string(name) + "=\"" + std::string(spec) +
                 "\" is not a task list such as \"2(x3),1\""};
  };
  int first_node = 0;
  std::string_view rest = trim(spec);
  if (rest.empty()) return bad();
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    int repeat = 1;
    if (const std::size_t paren = item.find('('); paren != std::string_view::npos) {
      if (item.size() < paren + 4 || item[paren + 1] != 'x' || item.back() != ')') return bad();
      auto times = parse_count(item.substr(paren + 2, item.size() - paren - 3));
      if (!times || *times < 1) return bad();
      repeat = *times;
      item = item.substr(0, paren);
    }
    auto tasks = parse_count(item);
    if (!tasks || *tasks < 1) return bad();
    if (node < first_node + repeat) return *tasks;
    first_node += repeat;
  }
  return Error{std::string(name) + "=\"" + std::string(spec) + "\" lists " +
               std::to_string(first_node) + " nodes but SLURM_NODEID=" + std::to_string(node)};
}

Result<LaunchEnv> from_slurm(const Environment& env) {
  Reader read(env);
  std::string_view size_name = "SLURM_STEP_NUM_TASKS";
  const auto rank = read.get("SLURM_PROCID");
  const auto size = read.first_of({"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, size_name);
  const auto local_rank = read.get("SLURM_LOCALID");
  const auto node = read.get("SLURM_NODEID");
  const auto per_node = read.get("SLURM_NTASKS_PER_NODE");
  if (read.error()) return *read.error();
  if (!size)
    return Error{"SLURM_PROCID is set but neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS is"};
  if (!local_rank) return Error{"SLURM_PROCID is set but SLURM_LOCALID is not"};
  LaunchEnv e;
  e.launcher = Launcher::slurm;
  e.rank = *rank;
  e.world_size = *size;
  e.local_rank = *local_rank;
  e.local_world_size.reset();
  e.node_rank = node;
  std::string_view local_size_name = "SLURM_STEP_TASKS_PER_NODE";
  for (std::string_view name : {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    auto spec = lookup(env, name);
    if (!spec || !node) continue;
    auto tasks = slurm_tasks_on_node(*spec, *node, name);
    if (!tasks) return tasks.error();
    e.local_world_size = *tasks;
    local_size_name = name;
    break;
  }
  if (!e.local_world_size) {
    if (per_node) {
      e.local_world_size = per_node;
      local_size_name = "SLURM_NTASKS_PER_NODE";
    }
  }
  if (Status s = check_ranges(
          e, {"SLURM_PROCID", size_name, "SLURM_LOCALID", local_size_name, "SLURM_NODEID"});
      !s) {
    return s.error();
  }
  return e;
}

bool has(const Environment& env, std::string_view name) {
  return lookup(env, name).has_value();
}

}  // namespace

Environment current_environment() {
  Environment env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view text(*entry);
    const std::size_t eq = text.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

std::string_view to_string(Launcher launcher) {
  switch (launcher) {
    case Launcher::none:
      return "none";
    case Launcher::torchrun:
      return "torchrun";
    case Launcher::open_mpi:
      return "Open MPI";
    case Launcher::pmi:
      return "PMI";
    case Launcher::slurm:
      return "Slurm";
  }
  return "unknown";
}

std::string LaunchEnv::describe() const {
  std::string text = "rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                     " (local " + std::to_string(local_rank);
  if (local_world_size) text += " of " + std::to_string(*local_world_size);
  if (node_rank) text += ", node " + std::to_string(*node_rank);
  text += ")";
  text += launcher == Launcher::none ? std::string(", a single process")
                                     : " from " + std::string(to_string(launcher));
  return text;
}

Result<LaunchEnv> parse_launch_env(const Environment& env) {
  if (has(env, "RANK") || has(env, "WORLD_SIZE")) return from_torchrun(env);
  if (has(env, "LOCAL_RANK") && !has(env, "OMPI_COMM_WORLD_RANK") && !has(env, "PMI_RANK") &&
      !has(env, "SLURM_PROCID")) {
    return Error{"LOCAL_RANK is set but RANK and WORLD_SIZE are not (torchrun sets all three)"};
  }
  if (has(env, "OMPI_COMM_WORLD_RANK") || has(env, "OMPI_COMM_WORLD_SIZE"))
    return from_open_mpi(env);
  if (has(env, "PMI_RANK") || has(env, "PMI_SIZE")) return from_pmi(env);
  // A Slurm batch script also sees SLURM_PROCID; only a task that srun started
  // belongs to a job step.
  if (has(env, "SLURM_PROCID") && (has(env, "SLURM_STEP_ID") || has(env, "SLURM_STEPID"))) {
    return from_slurm(env);
  }
  return LaunchEnv{};
}

std::string new_run_id() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[40];
  std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
  std::random_device random;
  char tail[16];
  std::snprintf(tail, sizeof tail, "-%08x", static_cast<unsigned>(random()));
  return std::string(text) + tail;
}

std::string shared_run_id(const Environment& env) {
  auto value = [&](std::string_view name) {
    const auto text = lookup(env, name);
    return text ? std::string(trim(*text)) : std::string();
  };
  if (std::string id = value(kRunIdVariable); !id.empty()) return id;
  if (has(env, "OMPI_COMM_WORLD_SIZE")) {
    std::string job = value("PMIX_NAMESPACE");
    if (job.empty()) job = value("OMPI_MCA_ess_base_jobid");
    if (!job.empty()) {
      std::string id = "openmpi-" + job;
      // Open MPI 4's mpirun address ("307036160.0;tcp://10.0.0.2:53861;..."),
      // the same for every rank on every host; as a 32-bit FNV-1a digest.
      if (const std::string mpirun = value("OMPI_MCA_orte_hnp_uri"); !mpirun.empty()) {
        std::uint32_t digest = 2166136261u;
        for (unsigned char c : mpirun)
          digest = (digest ^ c) * 16777619u;
        char hex[16];
        std::snprintf(hex, sizeof hex, "-%08x", static_cast<unsigned>(digest));
        id += hex;
      }
      return id;
    }
  }
  if (const std::string job = value("SLURM_JOB_ID"); !job.empty()) {
    const std::string step = value("SLURM_STEP_ID");
    return "slurm-" + job + (step.empty() ? "" : "." + step);
  }
  return {};
}

std::string NcclRendezvous::to_string() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<NcclRendezvous> parse_nccl_comm_id(std::string_view value) {
  const std::string quoted = "NCCL_COMM_ID=\"" + std::string(value) + "\"";
  std::string_view text = trim(value);
  if (text.empty()) return Error{quoted + " is empty; it must be host:port"};
  std::string_view host;
  std::string_view port_text;
  if (text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos)
      return Error{quoted + " opens '[' for an IPv6 address but never closes it"};
    host = text.substr(1, close - 1);
    if (close + 1 >= text.size() || text[close + 1] != ':') {
      return Error{quoted + " has no :port after the IPv6 address"};
    }
    port_text = text.substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos)
      return Error{quoted + " has no port; it must be host:port"};
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return Error{quoted + " looks like an IPv6 address; write it as [address]:port"};
    }
  }
  if (host.empty()) return Error{quoted + " has no host before the port"};
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_' || c == ':' || c == '%';
    if (!ok)
      return Error{quoted + " has a character a host name cannot contain: '" + std::string(1, c) +
                   "'"};
  }
  auto port = parse_count(port_text);
  if (!port || *port < 1 || *port > 65535) {
    return Error{quoted + ": the port \"" + std::string(port_text) +
                 "\" is not a number from 1 to 65535"};
  }
  return NcclRendezvous{std::string(host), *port};
}

Result<std::optional<NcclRendezvous>> nccl_rendezvous_from(const Environment& env) {
  auto value = lookup(env, "NCCL_COMM_ID");
  if (!value || trim(*value).empty()) return std::optional<NcclRendezvous>{};
  auto parsed = parse_nccl_comm_id(*value);
  if (!parsed) return parsed.error();
  return std::optional<NcclRendezvous>{std::move(parsed).value()};
}

}  // namespace cs::profiler
