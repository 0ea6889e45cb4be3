#include "profiler/process_tree.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include <dirent.h>
#include <signal.h>

namespace cs::profiler {

namespace {

// /proc/PID/stat: "PID (COMM) STATE PPID PGRP ..."; COMM may hold spaces and
// parentheses, so the fields are read after its last ')'.
bool read_stat(pid_t pid, ProcessEntry& entry) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream fields(text.substr(close + 1));
  long parent = 0, group = 0;
  char state = '?';
  if (!(fields >> state >> parent >> group)) return false;
  entry = {pid, pid_t(parent), pid_t(group), state};
  return true;
}

}  // namespace

std::vector<ProcessEntry> descendant_processes(pid_t root) {
  std::multimap<pid_t, ProcessEntry> by_parent;
  if (DIR* proc = opendir("/proc")) {
    while (const dirent* item = readdir(proc)) {
      char* end = nullptr;
      const long pid = std::strtol(item->d_name, &end, 10);
      if (pid <= 0 || *end != '\0') continue;
      ProcessEntry entry;
      if (read_stat(pid_t(pid), entry)) by_parent.emplace(entry.parent, entry);
    }
    closedir(proc);
  }
  std::vector<ProcessEntry> below;
  std::vector<pid_t> parents{root};
  while (!parents.empty()) {
    const pid_t parent = parents.back();
    parents.pop_back();
    auto [first, last] = by_parent.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      below.push_back(it->second);
      parents.push_back(it->second.pid);
    }
  }
  return below;
}

bool process_running(pid_t pid) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) return false;
  ProcessEntry entry;
  return !read_stat(pid, entry) || entry.state != 'Z';
}

int signal_descendants(pid_t root, int signal, pid_t skip_group) {
  int sent = 0;
  for (const ProcessEntry& process : descendant_processes(root)) {
    if (process.state == 'Z' || (skip_group > 0 && process.group == skip_group)) continue;
    if (kill(process.pid, signal) == 0) ++sent;
  }
  return sent;
}

}  // namespace cs::profiler
