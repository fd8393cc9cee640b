// ChildProcess: a daemon the benchmarks start themselves (staggerd,
// stagger-agent), whose first "listening on" line on stderr says where it
// serves. The child dies with the benchmark (PR_SET_PDEATHSIG); its later
// stderr is read and dropped, so it never blocks on a full pipe.
//
//   ChildProcess sd = ChildProcess::Spawn({"build/bin/staggerd",
//                                          "--address=127.0.0.1:0"});
//   if (sd.line.empty()) { /* it exited before listening */ }
//   std::string port = MatchFirst(sd.line, "listening on 127.0.0.1:(\\d+)");
#ifndef STAGGER_BENCH_CHILD_PROCESS_H_
#define STAGGER_BENCH_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace stagger::bench {

struct ChildProcess {
  pid_t pid = -1;
  std::string line;  // its "listening on" line; empty if it never printed one

  // Starts argv[0] (a path) with argv, and waits for its "listening on"
  // line (or for its stderr to close: it exited).
  static ChildProcess Spawn(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    ChildProcess c;
    c.pid = fork();
    if (c.pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      dup2(fds[1], 2);
      std::vector<char*> args;
      for (const std::string& a : argv) {
        args.push_back(const_cast<char*>(a.c_str()));
      }
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    FILE* err = fdopen(fds[0], "r");
    char buf[4096];
    while (fgets(buf, sizeof(buf), err) != nullptr) {
      if (std::string(buf).find("listening on") != std::string::npos) {
        c.line = buf;
        break;
      }
    }
    std::thread([err] {
      char b[4096];
      while (fgets(b, sizeof(b), err) != nullptr) {
      }
      fclose(err);
    }).detach();
    return c;
  }
};

// The first group of `re` in `text`, or "".
inline std::string MatchFirst(const std::string& text, const std::string& re) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(re)) ? m[1].str() : "";
}

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_CHILD_PROCESS_H_
