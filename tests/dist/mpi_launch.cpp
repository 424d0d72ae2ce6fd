#include "mpi_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "sl_config.h"

namespace sl::testing {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

bool on_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (!dir.empty() && access((dir + "/" + exe).c_str(), X_OK) == 0) return true;
  }
  return false;
}

void remove_tree(const std::string& dir) {
  std::string cmd = "rm -rf '" + dir + "'";
  [[maybe_unused]] int rc = std::system(cmd.c_str());
}

}  // namespace

std::string RankRun::report() const {
  std::ostringstream os;
  os << "command: " << command << "\n";
  os << "exit code " << exit_code << (timed_out ? " (killed by the watchdog)" : "") << " after "
     << seconds << " s\n";
  for (size_t r = 0; r < rank_stdout.size(); ++r) {
    os << "----- rank " << r << " stdout -----\n" << rank_stdout[r];
    os << "----- rank " << r << " stderr -----\n" << rank_stderr[r];
  }
  os << "----- mpirun -----\n" << launcher_output;
  return os.str();
}

std::string RankRun::all_output() const {
  std::string s = launcher_output;
  for (size_t r = 0; r < rank_stdout.size(); ++r) s += rank_stdout[r] + rank_stderr[r];
  return s;
}

bool mpi_available() {
  return SL_HAVE_MPI && on_path("mpirun");
}

std::string ranks_binary() {
  const char* p = std::getenv("SL_DIST_RANKS_BIN");
  return p ? p : "";
}

RankRun run_ranks(int np, const std::string& program, const std::vector<std::string>& args,
                  double watchdog_s, const std::map<std::string, std::string>& env) {
  RankRun run;
  char tmpl[] = "/tmp/sl_ranks_XXXXXX";
  std::string dir = mkdtemp(tmpl) ? tmpl : "/tmp";
  std::string outdir = dir + "/out";
  std::string log = dir + "/mpirun.log";

  std::vector<std::string> argv = {
      "mpirun", "-np", std::to_string(np), "--oversubscribe", "--output-filename", outdir, program};
  argv.insert(argv.end(), args.begin(), args.end());
  for (const auto& a : argv) run.command += a + " ";

  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // own process group, so the watchdog can kill mpirun and every rank
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    setenv("SL_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    execvp("mpirun", cargv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (el > watchdog_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      run.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  run.exit_code =
      run.timed_out ? -1 : (WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  run.launcher_output = read_file(log);
  for (int r = 0; r < np; ++r) {
    std::string base = outdir + "/1/rank." + std::to_string(r);
    run.rank_stdout.push_back(read_file(base + "/stdout"));
    run.rank_stderr.push_back(read_file(base + "/stderr"));
  }
  remove_tree(dir);
  return run;
}

}  // namespace sl::testing
