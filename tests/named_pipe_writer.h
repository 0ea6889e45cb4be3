#pragma once
// A named pipe with a program writing to it: what a user may give where a
// file is asked for (`--plan <(...)`, a FIFO chosen in a file dialog). The
// writer waits for a reader and sends its bytes; finish() lets it go when
// nothing read them (they must fit the pipe's buffer, 64 KiB on Linux).

#include <QByteArray>
#include <QString>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cs::test {

class NamedPipeWriter {
 public:
  NamedPipeWriter(const QString& path, QByteArray bytes)
      : path_(path.toUtf8()), bytes_(std::move(bytes)) {
    made_ = ::mkfifo(path_.constData(), 0600) == 0;
    if (made_) writer_ = std::thread([this] { write_all(); });
  }
  ~NamedPipeWriter() {
    finish();
    if (made_) ::unlink(path_.constData());
  }
  NamedPipeWriter(const NamedPipeWriter&) = delete;
  NamedPipeWriter& operator=(const NamedPipeWriter&) = delete;

  bool made() const { return made_; }  // false: no pipe, no writer

  // After the reader (if any) is done: a writer still waiting for one is let
  // go by opening the pipe's read end, then joined.
  void finish() {
    if (!writer_.joinable()) return;
    const int fd = ::open(path_.constData(), O_RDONLY | O_NONBLOCK);
    writer_.join();
    if (fd >= 0) ::close(fd);
  }

 private:
  void write_all() {
    const int fd = ::open(path_.constData(), O_WRONLY);  // waits for a reader
    if (fd < 0) return;
    for (qsizetype at = 0; at < bytes_.size();) {
      const ssize_t n = ::write(fd, bytes_.constData() + at, std::size_t(bytes_.size() - at));
      if (n <= 0) break;
      at += n;
    }
    ::close(fd);
  }

  QByteArray path_;
  QByteArray bytes_;
  bool made_ = false;
  std::thread writer_;
};

}  // namespace cs::test
