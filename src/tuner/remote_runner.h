// The host's end of measuring through a runner (MeasureOptions::runner): a
// command, run with /bin/sh -c, that starts `kiln-measure-worker --serve` on
// the device (`ssh pi@device kiln-measure-worker --serve`, or under
// qemu-user in tests) and speaks the serve protocol of measure_worker.h on its
// stdin and stdout.
//
// One RemoteRunner keeps the command running across candidates and batches.
// A candidate whose request times out, or that the runner answers with
// anything but a result line (it exited, printed garbage), gets a failed
// Reply carrying the runner's stderr tail; the runner is killed (its whole
// process group) and started again for the next request. A runner that
// cannot be started, or that does not print its hello line, is not a
// candidate's fault: hello() and request() throw std::runtime_error then.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace kiln::tuner {

class RemoteRunner {
 public:
  // What the serve-mode worker says about the device when it starts.
  struct Hello {
    std::string arch;                   // runtime::host_arch() there
    std::vector<std::string> features;  // the checkable CPU features it has
    int num_threads = 0;                // its kernels' default thread count
    std::string isolation;              // "fork" (a child per candidate) or "none"
  };
  struct Reply {
    std::string line;   // the result line, when `error` is empty
    std::string error;  // why there is no result line (stderr tail included)
    bool timed_out = false;
    double wall_s = 0;  // request sent to reply read
  };

  // Starts nothing yet; start_timeout_s bounds each start (to its hello line).
  explicit RemoteRunner(std::string command, double start_timeout_s = 60);
  ~RemoteRunner();  // closes the runner's stdin (EOF: it exits), kills it if it lingers
  RemoteRunner(const RemoteRunner&) = delete;
  RemoteRunner& operator=(const RemoteRunner&) = delete;

  // Starts the runner if it is not running and returns its hello.
  const Hello& hello();
  // Sends one request (header line + library bytes) and waits up to timeout_s
  // for its result line.
  Reply request(const std::string& header, const std::string& payload, double timeout_s);

  const std::string& command() const { return command_; }
  int starts() const { return starts_; }  // how often the command was started

 private:
  void start();
  void stop(bool kill_now);
  std::string status_text();  // "exited with status 1" etc., after stop()

  std::string command_;
  double start_timeout_s_;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::string out_buf_, err_tail_;
  int exit_status_ = 0;
  bool reaped_ = false;
  Hello hello_;
  int starts_ = 0;
};

}  // namespace kiln::tuner
