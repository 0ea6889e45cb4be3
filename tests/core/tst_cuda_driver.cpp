// The CUDA driver shim (core/cuda_driver.h): loaded() never loads a driver;
// load() binds the entry points the host probe and the memory sampler need,
// where a driver is installed.

#include <QtTest>

#include <dlfcn.h>

#include "core/cuda_driver.h"

namespace {

bool driver_in_process() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (handle) dlclose(handle);
  return handle != nullptr;
}

}  // namespace

class TestCudaDriver : public QObject {
  Q_OBJECT

 private slots:
  void loadedNeverLoads();
  void loadBindsTheEntryPoints();
};

void TestCudaDriver::loadedNeverLoads() {
  if (driver_in_process()) QSKIP("this test process has a CUDA driver loaded already");
  QVERIFY(!cs::CudaDriver::loaded());
  QVERIFY(!driver_in_process());
}

void TestCudaDriver::loadBindsTheEntryPoints() {
  const std::unique_ptr<cs::CudaDriver> d = cs::CudaDriver::load();
  if (!d) QSKIP("no CUDA driver (libcuda.so.1) on this machine");
  QVERIFY(d->cuInit && d->cuDriverGetVersion && d->cuGetErrorString);
  QVERIFY(d->cuDeviceGetCount && d->cuDeviceGet && d->cuDeviceGetName && d->cuDeviceTotalMem &&
          d->cuDeviceGetAttribute);
  QVERIFY(d->cuDevicePrimaryCtxGetState && d->cuDevicePrimaryCtxRetain &&
          d->cuDevicePrimaryCtxRelease && d->cuCtxPushCurrent && d->cuCtxPopCurrent &&
          d->cuMemGetInfo);
  // Held by `d`, the driver is now the process's loaded one.
  QVERIFY(cs::CudaDriver::loaded());
  int version = 0;
  QCOMPARE(d->cuDriverGetVersion(&version), 0);
  QVERIFY(version > 0);
}

QTEST_GUILESS_MAIN(TestCudaDriver)
#include "tst_cuda_driver.moc"
