#pragma once
// Result-or-error for core, planners and profiler: failures travel upward as a
// readable message that names the file, field or rank; nothing here throws.

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace cs {

struct Error {
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  // By value: `for (auto& x : f().value())` and `auto&& v = f().value()`
  // hold the value itself, not a reference into a destroyed Result.
  T value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(state_);
  }
  const std::string& message() const { return error().message; }

 private:
  std::variant<T, Error> state_;
};

// Success or a message, for operations that produce nothing.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : message_(std::move(error.message)), failed_(true) {}
  static Status success() { return {}; }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }
  Error error() const { return {message_}; }

 private:
  std::string message_;
  bool failed_ = false;
};

}  // namespace cs
