#pragma once
// What this machine has: CPU cores, memory and NVIDIA GPUs. GPUs are found
// through the CUDA driver, loaded at run time (libcuda.so.1), so that the
// program starts and says "no GPU" plainly on machines without a driver.

#include <string>
#include <vector>

#include "core/hardware.h"

namespace cs {

class PresetCatalog;

struct GpuDevice {
  int index = 0;
  std::string name;           // as the driver reports it, e.g. "NVIDIA H200"
  double memory_bytes = 0;
  int multiprocessors = 0;
  int compute_major = 0;
  int compute_minor = 0;
  double clock_hz = 0;        // SM clock
  double memory_bandwidth = 0;  // bytes/s from memory clock and bus width, when reported
};

struct HostInfo {
  std::string hostname;
  std::string cpu_model;
  int cpu_cores = 0;          // logical processors online
  double memory_bytes = 0;
  int driver_version = 0;     // CUDA driver version, e.g. 13000; 0 without a driver
  std::vector<GpuDevice> gpus;
  std::string gpu_status;     // "1 GPU: NVIDIA H200", or why there is none
};

HostInfo probe_host();

// The memory of the smallest GPU here (bytes); 0 without one.
double smallest_gpu_memory_bytes(const HostInfo& host);

// This machine as a one-node cluster. GPUs take the datasheet of the preset
// whose device_names match (else the driver's figures, peaks unknown); with
// no GPU the cluster has gpus_per_node = 0 and the CPU engine is what runs.
Cluster this_machine_cluster(const HostInfo& host, const PresetCatalog& catalog);

}  // namespace cs
