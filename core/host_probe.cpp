#include "core/host_probe.h"

#include <fstream>
#include <thread>

#include <unistd.h>

#include "core/cuda_driver.h"
#include "core/host_name.h"
#include "core/presets.h"

namespace cs {

namespace {

std::string read_cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return {};
}

// CUdevice_attribute values from cuda.h (stable across versions).
constexpr int kAttrClockRate = 13;              // kHz
constexpr int kAttrMultiprocessors = 16;
constexpr int kAttrMemoryClockRate = 36;        // kHz
constexpr int kAttrGlobalMemoryBusWidth = 37;   // bits
constexpr int kAttrComputeMajor = 75;
constexpr int kAttrComputeMinor = 76;

void probe_gpus(HostInfo& host) {
  const std::unique_ptr<CudaDriver> driver = CudaDriver::load();
  if (!driver) {
    host.gpu_status = "no GPU: the NVIDIA driver (libcuda.so.1) is not installed";
    return;
  }
  const CudaDriver& d = *driver;
  if (!d.cuInit || !d.cuDriverGetVersion || !d.cuDeviceGetCount || !d.cuDeviceGet ||
      !d.cuDeviceGetName || !d.cuDeviceTotalMem || !d.cuDeviceGetAttribute) {
    host.gpu_status = "no GPU: libcuda.so.1 lacks the driver API entry points";
    return;
  }
  d.cuDriverGetVersion(&host.driver_version);
  if (int rc = d.cuInit(0); rc != 0) {
    const char* text = nullptr;
    if (d.cuGetErrorString) d.cuGetErrorString(rc, &text);
    host.gpu_status = std::string("no GPU: the CUDA driver did not initialise (") +
                      (text ? text : "error " + std::to_string(rc)) + ")";
    return;
  }
  int count = 0;
  if (d.cuDeviceGetCount(&count) != 0 || count <= 0) {
    host.gpu_status = "no GPU: the CUDA driver reports no device";
    return;
  }
  for (int i = 0; i < count; ++i) {
    int dev = 0;
    if (d.cuDeviceGet(&dev, i) != 0) continue;
    GpuDevice g;
    g.index = i;
    char name[256] = {};
    d.cuDeviceGetName(name, sizeof name, dev);
    g.name = name;
    std::size_t bytes = 0;
    d.cuDeviceTotalMem(&bytes, dev);
    g.memory_bytes = static_cast<double>(bytes);
    int value = 0;
    if (d.cuDeviceGetAttribute(&value, kAttrMultiprocessors, dev) == 0) g.multiprocessors = value;
    if (d.cuDeviceGetAttribute(&value, kAttrComputeMajor, dev) == 0) g.compute_major = value;
    if (d.cuDeviceGetAttribute(&value, kAttrComputeMinor, dev) == 0) g.compute_minor = value;
    if (d.cuDeviceGetAttribute(&value, kAttrClockRate, dev) == 0) g.clock_hz = value * 1e3;
    int mem_clock = 0;
    int bus_bits = 0;
    if (d.cuDeviceGetAttribute(&mem_clock, kAttrMemoryClockRate, dev) == 0 &&
        d.cuDeviceGetAttribute(&bus_bits, kAttrGlobalMemoryBusWidth, dev) == 0) {
      g.memory_bandwidth = 2.0 * mem_clock * 1e3 * bus_bits / 8.0;  // double data rate
    }
    host.gpus.push_back(std::move(g));
  }
  host.gpu_status = std::to_string(host.gpus.size()) + (host.gpus.size() == 1 ? " GPU: " : " GPUs: ") +
                    (host.gpus.empty() ? std::string("none usable") : host.gpus.front().name);
}

}  // namespace

double smallest_gpu_memory_bytes(const HostInfo& host) {
  double smallest = 0;
  for (const GpuDevice& g : host.gpus) {
    if (g.memory_bytes > 0 && (smallest == 0 || g.memory_bytes < smallest))
      smallest = g.memory_bytes;
  }
  return smallest;
}

HostInfo probe_host() {
  HostInfo host;
  host.hostname = this_host_name();
  host.cpu_model = read_cpu_model();
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  host.cpu_cores = online > 0 ? static_cast<int>(online)
                              : static_cast<int>(std::thread::hardware_concurrency());
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) host.memory_bytes = static_cast<double>(pages) * page_size;
  probe_gpus(host);
  return host;
}

Cluster this_machine_cluster(const HostInfo& host, const PresetCatalog& catalog) {
  Cluster c;
  c.name = std::string(kThisMachine);
  c.display_name = host.hostname.empty() ? "This machine" : "This machine (" + host.hostname + ")";
  c.nodes = 1;
  c.cpu_cores_per_node = host.cpu_cores;
  c.host_memory_bytes = host.memory_bytes;
  c.source = "detected at run time: " + host.gpu_status;
  c.gpus_per_node = static_cast<int>(host.gpus.size());
  if (host.gpus.empty()) return c;

  const GpuDevice& first = host.gpus.front();
  GpuSpec gpu;
  if (const GpuSpec* preset = catalog.match_device(first.name)) {
    gpu = *preset;
  } else {
    gpu.name = "detected-gpu";
    gpu.vendor = "NVIDIA";
    // No datasheet: FP32 from 64 FMA lanes per SM at the reported clock, a
    // floor for every NVIDIA architecture since Pascal; calibrate for the rest.
    gpu.peak.fp32 = first.multiprocessors * first.clock_hz * 64 * 2;
    gpu.source = "CUDA driver; no preset matches this model, so only an FP32 floor is known "
                 "(calibrate to measure it)";
  }
  gpu.display_name = first.name;
  gpu.memory_bytes = first.memory_bytes;  // what this board really has
  if (gpu.memory_bandwidth <= 0) gpu.memory_bandwidth = first.memory_bandwidth;
  c.gpu = gpu;

  // Several GPUs talk over the board's own fabric when the preset names one,
  // else over PCIe.
  const Link* link = catalog.find_link(node_link_preset(gpu));
  if (!link) link = catalog.find_link("pcie4");
  if (link) c.intra_node = *link;
  return c;
}

}  // namespace cs
