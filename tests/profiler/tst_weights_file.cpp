// The worker's weights file (--dump-weights): what it writes reads back, and
// a file that is cut short, damaged or not one is refused with a message
// naming the file and the parameter, without first allocating what a
// damaged size states.

#include <QTemporaryDir>
#include <QtTest>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "profiler/worker/weights_file.h"

using namespace cs::worker;

namespace {

std::string u32(std::uint32_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 4);
}
std::string u64(std::uint64_t v) {
  return std::string(reinterpret_cast<const char*>(&v), 8);
}

// One parameter as the file holds it: name length, name, count, values.
std::string parameter(const std::string& name, std::uint64_t stated, int values) {
  std::string s = u32(static_cast<std::uint32_t>(name.size())) + name + u64(stated);
  for (int i = 0; i < values; ++i) {
    const float v = 0.5f * i;
    s.append(reinterpret_cast<const char*>(&v), 4);
  }
  return s;
}

std::string header(std::uint32_t count) {
  return "CSW1" + u32(count);
}

}  // namespace

class TestWeightsFile : public QObject {
  Q_OBJECT

 private slots:
  void roundTrip();
  void refusals_data();
  void refusals();
  void missingFileIsNamed();
};

void TestWeightsFile::roundTrip() {
  QTemporaryDir dir;
  const std::string path = dir.filePath("w.bin").toStdString();
  const NamedWeights written = {{"h0.ln1.weight", {1.0f, 2.0f, 3.0f}}, {"wte", {-4.5f}}, {"z", {}}};
  QVERIFY(write_weights(path, written).ok());
  auto read = read_weights(path);
  QVERIFY2(read.ok(), read.ok() ? "" : read.message().c_str());
  QVERIFY(*read == written);
}

void TestWeightsFile::refusals_data() {
  QTest::addColumn<QByteArray>("bytes");
  QTest::addColumn<QString>("message");
  const std::string whole = header(2) + parameter("wte", 3, 3) + parameter("lm_head.weight", 2, 2);
  auto row = [](const char* tag, const std::string& bytes, const char* message) {
    QTest::newRow(tag) << QByteArray(bytes.data(), static_cast<qsizetype>(bytes.size()))
                       << QString(message);
  };
  row("empty", "", ": not a weights file");
  row("another format", "PK\x03\x04 and more", ": not a weights file");
  row("cut in the header", whole.substr(0, 6), ": truncated in its header");
  row("cut in a name", whole.substr(0, 8 + 4 + 1), ": parameter 1 of 2: truncated in its name");
  row("cut in the values", whole.substr(0, whole.size() - 3),
      ": parameter 2 of 2 (lm_head.weight): 2 values stated, the file holds 1 more: "
      "truncated or corrupt");
  // A damaged count: a gigabyte of floats stated, 3 there. It was allocated
  // (and filled with zeros) before the read found the file short.
  row("a size past the end", header(1) + parameter("wte", std::uint64_t{1} << 28, 3),
      ": parameter 1 of 1 (wte): 268435456 values stated, the file holds 3 "
      "more: truncated or corrupt");
  row("a name length past any name", header(1) + u32(100000) + "wte",
      ": parameter 1 of 1: corrupt name length 100000");
  row("a parameter twice", header(2) + parameter("wte", 1, 1) + parameter("wte", 1, 1),
      ": parameter 2 of 2: wte appears twice");
  row("bytes after the last parameter", whole + "xy", ": 2 bytes after its 2 parameters: corrupt");
  row("fewer parameters than stated", header(3) + parameter("wte", 1, 1),
      ": parameter 2 of 3: truncated");
}

void TestWeightsFile::refusals() {
  QFETCH(QByteArray, bytes);
  QFETCH(QString, message);
  QTemporaryDir dir;
  const std::string path = dir.filePath("w.bin").toStdString();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.constData(), bytes.size());
  }
  auto read = read_weights(path);
  QVERIFY(!read.ok());
  QCOMPARE(QString::fromStdString(read.message()), QString::fromStdString(path) + message);
}

void TestWeightsFile::missingFileIsNamed() {
  auto read = read_weights("/nonexistent/w.bin");
  QVERIFY(!read.ok());
  QCOMPARE(QString::fromStdString(read.message()),
           QString("/nonexistent/w.bin: cannot open: No such file or directory"));
}

QTEST_GUILESS_MAIN(TestWeightsFile)
#include "tst_weights_file.moc"
