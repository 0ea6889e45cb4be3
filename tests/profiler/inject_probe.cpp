// Loads the injection library as the CUDA driver does (dlopen, then
// InitializeInjection) and prints what it found, for tst_cupti_inject.
// Usage: cs_inject_probe LIBRARY [CALLS]

#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include <dlfcn.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cs_inject_probe LIBRARY [CALLS]\n");
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    std::printf("dlopen failed: %s\n", dlerror());
    return 3;
  }
  for (const char* name :
       {"InitializeInjection", "InitializeInjectionNvtx2", "InitializeInjectionNvtxExtension"}) {
    std::printf("%s %s\n", name, dlsym(library, name) ? "exported" : "missing");
  }
  // Functions of the static libraries inside (the profiler's, core's CUDA
  // driver shim): they must not leak into the program's namespace.
  bool leaked = false;
  for (const char* name :
       {"_ZN2cs8profiler19current_environmentB5cxx11Ev", "_ZN2cs10CudaDriver6loadedEv"}) {
    if (dlsym(library, name)) leaked = true;
  }
  std::printf("internal symbols %s\n", leaked ? "exported" : "hidden");
  auto initialize = reinterpret_cast<int (*)()>(dlsym(library, "InitializeInjection"));
  if (!initialize) return 4;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 1;
  for (int i = 0; i < calls; ++i)
    std::printf("InitializeInjection=%d\n", initialize());
  std::fflush(stdout);
  return 0;
}
