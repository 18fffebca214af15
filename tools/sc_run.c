/* SPDX-License-Identifier: BSD-3-Clause */
/* sc-run: start N ranks of a program on this host with the environment
 * sc_comm_init_env reads, watch them, and stop the whole job as soon as one
 * rank fails, so that a crashed rank never leaves the others blocked until
 * their communication timeout. Needs only libc. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/sc_run_job.h"
#include "tools/sc_run_netbed.h"
#include "tools/sc_run_output.h"
#include "tools/sc_topo.h"

#define MAX_RANKS    4096
#define TERM_TO_KILL 2.0 /* seconds between SIGTERM and SIGKILL */

typedef struct rank_proc {
  pid_t pid;
  int running;
  int status;            /* waitpid status once !running */
  int stopped_by_us;     /* we sent it a signal before it ended */
  sc_run_stream_t io[2]; /* stdout, stderr (--label only) */
} rank_proc_t;

typedef enum job_phase {
  PHASE_RUNNING, /* all well so far */
  PHASE_GRACE,   /* a rank failed; the others get `grace` seconds to end on their own */
  PHASE_TERMED,  /* SIGTERM (or a forwarded signal) sent; SIGKILL at the deadline */
  PHASE_KILLED   /* SIGKILL sent; waiting for the last ones to be reaped */
} job_phase_t;

static int signal_pipe[2] = {-1, -1};

static netbed_t *netbed; /* NULL: every rank on this host as it is */

static void usage(FILE *f) {
  fprintf(f,
          "Usage: %s -n N [options] [--] program [args...]\n"
          "Start N ranks of program on this host for sc_comm_init_env.\n"
          "\n"
          "Each rank gets SC_RANK (0..N-1), SC_WORLD_SIZE=N, SC_ROOT_ADDR=127.0.0.1:PORT\n"
          "and a fresh 64-hex-digit SC_AUTH_TOKEN; stdin is /dev/null.\n"
          "\n"
          "Options:\n"
          "  -n, --np N           number of ranks (required)\n"
          "  -l, --label          prefix every output line with \"[rank] \"\n"
          "  -x VAR=VALUE         set VAR on every rank (repeatable; overrides sc-run's own)\n"
          "      --port P         bootstrap port of rank 0 (default: a free port)\n"
          "      --timeout SEC    kill the job after SEC seconds and exit 124 (default: none)\n"
          "      --grace SEC      after a rank fails, wait SEC seconds for the others\n"
          "                       before SIGTERM, then SIGKILL 2 s later (default: 3)\n"
          "      --netbed[=BED]   run the ranks on the hosts of an sc-netbed emulated\n"
          "                       cluster (root only): BED is its prefix (default\n"
          "                       $SC_NETBED or " NETBED_DEFAULT "; state " NETBED_DIR "/BED.env)\n"
          "                       or the state file's path. Consecutive ranks share a\n"
          "                       host; each host gets its own hostname, and\n"
          "                       SC_ROOT_ADDR=host 0's address, SC_SOCKET_IFNAME=its veth\n"
          "      --ranks-per-host M  with --netbed: M ranks per host (default: the bed's)\n"
          "      --bind core|numa|none  core (default): rank r runs only on CPU r mod K\n"
          "                       of the K CPUs sc-run may use, like mpirun --bind-to\n"
          "                       core, one CPU per core first, spread across NUMA nodes\n"
          "                       (sc-info --topo prints the order); numa: on every CPU\n"
          "                       of NUMA node r mod N; none: the scheduler places ranks\n"
          "                       as it likes. A rank's threads (the library's progress\n"
          "                       thread) inherit its CPUs\n"
          "  -h, --help           this text\n"
          "\n"
          "Exit status: 0 when every rank exits 0; else the first failing rank's exit\n"
          "status, or 128+signal if it was killed; 124 on timeout; 2 on a usage error.\n"
          "SIGINT/SIGTERM are forwarded to all ranks; a second one sends SIGKILL.\n"
          "Each rank runs in its own process group; what a rank leaves running in\n"
          "it is killed when the job ends.\n",
          SC_RUN_NAME);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_signal(int sig) {
  int saved = errno;
  unsigned char b = (unsigned char)sig;
  /* A full pipe means a wake-up is already pending, which is all we need. */
  if (write(signal_pipe[1], &b, 1) < 0) {
  }
  errno = saved;
}

static double parse_seconds(const char *opt, const char *s, int allow_zero) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || v != v || v < 0 || (!allow_zero && v == 0) || v > 1e9)
    sc_run_die("%s: '%s' is not a valid number of seconds", opt, s);
  return v;
}

static long parse_long_opt(const char *opt, const char *s, long min, long max) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max)
    sc_run_die("%s: '%s' is not an integer in [%ld, %ld]", opt, s, min, max);
  return v;
}

static void describe_end(int status, char *out, size_t len) {
  if (WIFEXITED(status))
    snprintf(out, len, "exited with status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(out, len, "was killed by signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  else
    snprintf(out, len, "ended with wait status 0x%x", status);
}

static int failed(int status) {
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

/* Signals the rank's whole process group, so helpers it started go too. */
static void signal_rank(rank_proc_t *r, int sig) {
  if (kill(-r->pid, sig) < 0 && errno == ESRCH) kill(r->pid, sig);
  r->stopped_by_us = 1;
}

static void signal_running(rank_proc_t *ranks, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (ranks[i].running) signal_rank(&ranks[i], sig);
}

static int count_running(const rank_proc_t *ranks, int n) {
  int c = 0;
  for (int i = 0; i < n; i++) c += ranks[i].running;
  return c;
}

static void list_running(const rank_proc_t *ranks, int n, char *out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < n && used < len; i++)
    if (ranks[i].running)
      used += (size_t)snprintf(out + used, len - used, "%s%d", used ? "," : "", i);
}

/* The CPUs sc-run may use, in binding order (tools/sc_topo.h); bound ranks
 * take them round robin. */
enum { BIND_NONE, BIND_CORE, BIND_NUMA };
static int bind_mode = BIND_CORE;
static sc_topo_t bind_topo;
static int bind_loaded;

static void load_bind_cpus(void) {
  char err[128];
  if (sc_topo_load(&bind_topo, 0, err, sizeof(err)) != 0) sc_run_die("--bind: %s", err);
  bind_loaded = 1;
}

/* Left to itself, Linux keeps two ranks that talk to each other on one core
 * (it wakes a receiver where its sender runs) even while another core idles:
 * a tree's two busiest ranks on 4 ranks and 2 cores then share a core, and
 * the tree runs 1.2-1.5x slower than with each on its own. Binding makes
 * placement even and the same run after run. More ranks than CPUs are still
 * bound round robin: the one-host cost model was fitted so. Runs in the
 * child, before exec: threads the rank creates later inherit the set. */
static void bind_rank(int rank) {
  if (!bind_loaded || bind_topo.ncpus <= 0) return;
  cpu_set_t set;
  char what[64];
  if (bind_mode == BIND_NUMA) {
    const int n = rank % bind_topo.nnuma;
    set = bind_topo.numa_cpus[n];
    snprintf(what, sizeof(what), "NUMA node %d", bind_topo.numa_id[n]);
  } else {
    const int cpu = bind_topo.order[rank % bind_topo.ncpus];
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    snprintf(what, sizeof(what), "CPU %d", cpu);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    fprintf(stderr, "%s: rank %d: cannot bind to %s (%s); running unbound\n", SC_RUN_NAME, rank,
            what, strerror(errno));
}

static void start_rank(rank_proc_t *r, int rank, int label, char **argv) {
  int pipes[2][2];
  if (label)
    for (int k = 0; k < 2; k++)
      if (pipe2(pipes[k], O_CLOEXEC) < 0) sc_run_die("pipe: %s", strerror(errno));
  fflush(NULL);
  /* Until the child has dropped our handlers, a signal sent to it would run
   * on_signal there and look to us like a signal sent to sc-run. */
  sigset_t all, old_mask;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old_mask);
  pid_t pid = fork();
  if (pid < 0) sc_run_die("fork: %s", strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Only one rank could own a terminal's input, and a rank in its own
     * process group reading the terminal would be stopped by SIGTTIN. */
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) {
      dup2(devnull, 0);
      if (devnull != 0) close(devnull);
    }
    if (label) {
      dup2(pipes[0][1], 1);
      dup2(pipes[1][1], 2);
    }
    char rank_str[16];
    snprintf(rank_str, sizeof(rank_str), "%d", rank);
    setenv("SC_RANK", rank_str, 1);
    bind_rank(rank);
    if (netbed) netbed_enter(netbed, rank);
    execvp(argv[0], argv);
    fprintf(stderr, "%s: cannot execute '%s': %s\n", SC_RUN_NAME, argv[0], strerror(errno));
    _exit(127);
  }
  /* Also here, so that no signal can reach the child before it is in its group. */
  setpgid(pid, pid);
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  r->pid = pid;
  r->running = 1;
  for (int k = 0; k < 2; k++) {
    r->io[k].fd = -1;
    if (!label) continue;
    close(pipes[k][1]);
    r->io[k].fd = pipes[k][0];
    fcntl(r->io[k].fd, F_SETFL, fcntl(r->io[k].fd, F_GETFL) | O_NONBLOCK);
    r->io[k].out_fd = k + 1;
    r->io[k].rank = rank;
    r->io[k].buf = malloc(SC_RUN_LINE_MAX);
    if (!r->io[k].buf) sc_run_die("out of memory");
  }
}

int main(int argc, char **argv) {
  int nranks = 0, label = 0, port = 0;
  double timeout = 0, grace = 3.0;
  char **extra_env = NULL;
  int n_extra = 0;

  const char *netbed_spec = NULL;
  int ranks_per_host = 0;

  enum { OPT_TIMEOUT = 256, OPT_GRACE, OPT_PORT, OPT_NETBED, OPT_RPH, OPT_BIND };
  static const struct option longopts[] = {
      {"np", required_argument, NULL, 'n'},
      {"label", no_argument, NULL, 'l'},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"grace", required_argument, NULL, OPT_GRACE},
      {"port", required_argument, NULL, OPT_PORT},
      {"netbed", optional_argument, NULL, OPT_NETBED},
      {"ranks-per-host", required_argument, NULL, OPT_RPH},
      {"bind", required_argument, NULL, OPT_BIND},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  /* '+': options end at the program name, so its own options pass through. */
  int c;
  while ((c = getopt_long(argc, argv, "+n:lx:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'n':
      nranks = (int)parse_long_opt("-n", optarg, 1, MAX_RANKS);
      break;
    case 'l':
      label = 1;
      break;
    case 'x': {
      const char *eq = strchr(optarg, '=');
      if (!eq || eq == optarg) sc_run_die("-x: expected VAR=VALUE, got '%s'", optarg);
      char **grown = realloc(extra_env, sizeof(char *) * (size_t)(n_extra + 1));
      if (!grown) sc_run_die("out of memory");
      extra_env = grown;
      extra_env[n_extra++] = optarg;
      break;
    }
    case OPT_TIMEOUT:
      timeout = parse_seconds("--timeout", optarg, 0);
      break;
    case OPT_GRACE:
      grace = parse_seconds("--grace", optarg, 1);
      break;
    case OPT_PORT:
      port = (int)parse_long_opt("--port", optarg, 1, 65535);
      break;
    case OPT_NETBED:
      netbed_spec = optarg ? optarg : getenv("SC_NETBED");
      if (!netbed_spec || !*netbed_spec) netbed_spec = NETBED_DEFAULT;
      break;
    case OPT_RPH:
      ranks_per_host = (int)parse_long_opt("--ranks-per-host", optarg, 1, MAX_RANKS);
      break;
    case OPT_BIND:
      if (!strcmp(optarg, "core"))
        bind_mode = BIND_CORE;
      else if (!strcmp(optarg, "numa"))
        bind_mode = BIND_NUMA;
      else if (!strcmp(optarg, "none"))
        bind_mode = BIND_NONE;
      else
        sc_run_die("--bind: expected core, numa or none, got '%s'", optarg);
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (nranks <= 0) {
    fprintf(stderr, "%s: -n N is required\n", SC_RUN_NAME);
    usage(stderr);
    return 2;
  }
  if (optind >= argc) {
    fprintf(stderr, "%s: no program given\n", SC_RUN_NAME);
    usage(stderr);
    return 2;
  }
  char **child_argv = argv + optind;
  if (ranks_per_host && !netbed_spec) sc_run_die("--ranks-per-host needs --netbed");
  if (netbed_spec) {
    netbed = netbed_load(netbed_spec, ranks_per_host);
    if (netbed_host_of(netbed, nranks - 1) >= netbed->hosts)
      sc_run_die("--netbed: %d ranks at %d per host need %d hosts; the bed (%s) has %d "
                 "(use --ranks-per-host or a bigger bed)",
                 nranks, netbed->ranks_per_host,
                 (nranks + netbed->ranks_per_host - 1) / netbed->ranks_per_host, netbed->path,
                 netbed->hosts);
    if (!port) port = netbed_call_in_host0(netbed, sc_run_free_port);
  }

  if (!port) port = sc_run_free_port();
  if (bind_mode != BIND_NONE) load_bind_cpus();
  char token[65], value[64];
  sc_run_make_token(token);
  snprintf(value, sizeof(value), "%d", nranks);
  setenv("SC_WORLD_SIZE", value, 1);
  snprintf(value, sizeof(value), "127.0.0.1:%d", port);
  if (netbed) {
    snprintf(value, sizeof(value), "%s:%d", netbed->addr[0], port);
    setenv("SC_SOCKET_IFNAME", netbed->ifname, 1);
  }
  setenv("SC_ROOT_ADDR", value, 1);
  setenv("SC_AUTH_TOKEN", token, 1);
  for (int i = 0; i < n_extra; i++) {
    char *eq = strchr(extra_env[i], '=');
    *eq = '\0';
    setenv(extra_env[i], eq + 1, 1);
    *eq = '=';
  }

  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0) sc_run_die("pipe: %s", strerror(errno));
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  rank_proc_t *ranks = calloc((size_t)nranks, sizeof(*ranks));
  struct pollfd *pfds = calloc((size_t)(2 * nranks + 1), sizeof(*pfds));
  sc_run_stream_t **pstreams = calloc((size_t)(2 * nranks + 1), sizeof(*pstreams));
  if (!ranks || !pfds || !pstreams) sc_run_die("out of memory");
  for (int r = 0; r < nranks; r++) start_rank(&ranks[r], r, label, child_argv);

  const double start = now_s();
  job_phase_t phase = PHASE_RUNNING;
  /* --timeout bounds the whole job, including a grace period under way. */
  const double timeout_at = timeout > 0 ? start + timeout : 0; /* 0 = none */
  double phase_deadline = 0; /* GRACE: SIGTERM then; TERMED: SIGKILL then */
  int first_failed = -1, timed_out = 0, interrupted_by = 0;
  char running_list[8 * MAX_RANKS];

  for (;;) {
    /* Reap first, so a death is reported before the output that follows it is awaited. */
    for (;;) {
      int status;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (int r = 0; r < nranks; r++) {
        if (ranks[r].pid != pid || !ranks[r].running) continue;
        ranks[r].running = 0;
        ranks[r].status = status;
        if (failed(status) && first_failed < 0 && !ranks[r].stopped_by_us && !timed_out &&
            !interrupted_by) {
          first_failed = r;
          char how[128];
          describe_end(status, how, sizeof(how));
          int others = count_running(ranks, nranks) > 0;
          fprintf(stderr, "%s: rank %d (pid %ld) %s%s\n", SC_RUN_NAME, r, (long)pid, how,
                  others ? "; stopping the other ranks" : "");
          if (phase == PHASE_RUNNING && others) {
            phase = PHASE_GRACE;
            phase_deadline = now_s() + grace;
          }
        }
      }
    }

    int alive = count_running(ranks, nranks);
    int npfd = 0;
    pfds[npfd].fd = signal_pipe[0];
    pfds[npfd].events = POLLIN;
    pstreams[npfd++] = NULL;
    for (int r = 0; r < nranks; r++)
      for (int k = 0; k < 2; k++) {
        sc_run_stream_t *s = &ranks[r].io[k];
        if (s->fd < 0) continue;
        if (!alive) {
          /* Everything a finished rank wrote is already in the pipe; a helper
           * it left behind could hold the pipe open forever, so do not wait for EOF. */
          if (sc_run_pump_stream(s, r, 1024)) {
            if (s->used) sc_run_emit_labelled(s->out_fd, r, s->buf, s->used, 1);
            s->used = 0;
            close(s->fd);
            s->fd = -1;
          }
          continue;
        }
        pfds[npfd].fd = s->fd;
        pfds[npfd].events = POLLIN;
        pstreams[npfd++] = s;
      }
    if (!alive) break;

    double wake_at = phase == PHASE_GRACE || phase == PHASE_TERMED ? phase_deadline : 0;
    if (timeout_at > 0 && !timed_out && (wake_at == 0 || timeout_at < wake_at))
      wake_at = timeout_at;
    int wait_ms = -1;
    if (wake_at > 0) {
      double left = wake_at - now_s();
      wait_ms = left <= 0 ? 0 : (int)(left * 1000.0) + 1;
    }
    int ready = poll(pfds, (nfds_t)npfd, wait_ms);
    if (ready < 0 && errno != EINTR) sc_run_die("poll: %s", strerror(errno));

    if (ready > 0) {
      for (int i = 1; i < npfd; i++) {
        if (!pfds[i].revents) continue;
        sc_run_pump_stream(pstreams[i], pstreams[i]->rank, 16);
      }
      if (pfds[0].revents) {
        unsigned char sigs[64];
        ssize_t got;
        while ((got = read(signal_pipe[0], sigs, sizeof(sigs))) > 0) {
          for (ssize_t i = 0; i < got; i++) {
            int sig = sigs[i];
            if (sig == SIGCHLD) continue; /* reaped at the top of the loop */
            if (interrupted_by || phase == PHASE_KILLED) {
              /* Second request: the user does not want to wait. */
              signal_running(ranks, nranks, SIGKILL);
              phase = PHASE_KILLED;
            } else {
              interrupted_by = sig;
              fprintf(stderr, "%s: got signal %d (%s); forwarding it to the ranks\n", SC_RUN_NAME,
                      sig, strsignal(sig));
              signal_running(ranks, nranks, sig);
              phase = PHASE_TERMED;
              phase_deadline = now_s() + (grace > TERM_TO_KILL ? grace : TERM_TO_KILL);
            }
          }
        }
      }
    }

    double t = now_s();
    if (timeout_at > 0 && !timed_out && t >= timeout_at &&
        (phase == PHASE_RUNNING || phase == PHASE_GRACE)) {
      timed_out = 1;
      list_running(ranks, nranks, running_list, sizeof(running_list));
      fprintf(stderr, "%s: timeout after %g s; ranks still running: %s\n", SC_RUN_NAME, timeout,
              running_list);
      signal_running(ranks, nranks, SIGTERM);
      phase = PHASE_TERMED;
      phase_deadline = t + TERM_TO_KILL;
    } else if (phase == PHASE_GRACE && t >= phase_deadline) {
      signal_running(ranks, nranks, SIGTERM);
      phase = PHASE_TERMED;
      phase_deadline = t + TERM_TO_KILL;
    } else if (phase == PHASE_TERMED && t >= phase_deadline) {
      list_running(ranks, nranks, running_list, sizeof(running_list));
      fprintf(stderr, "%s: ranks still running after SIGTERM: %s; sending SIGKILL\n", SC_RUN_NAME,
              running_list);
      signal_running(ranks, nranks, SIGKILL);
      phase = PHASE_KILLED;
    }
  }

  int code = 0;
  if (timed_out)
    code = 124;
  else if (first_failed >= 0)
    code = exit_code_of(ranks[first_failed].status);
  else if (interrupted_by)
    code = 128 + interrupted_by;

  /* Helpers a rank left behind in its group must not outlive the job. */
  for (int r = 0; r < nranks; r++) kill(-ranks[r].pid, SIGKILL);
  if (code != 0) {
    fprintf(stderr, "%s: summary after %.1f s:\n", SC_RUN_NAME, now_s() - start);
    for (int r = 0; r < nranks; r++) {
      char how[128];
      describe_end(ranks[r].status, how, sizeof(how));
      fprintf(stderr, "%s:   rank %d (pid %ld) %s%s\n", SC_RUN_NAME, r, (long)ranks[r].pid, how,
              r == first_failed        ? " [first failure]"
              : ranks[r].stopped_by_us ? " [stopped by sc-run]"
                                       : "");
    }
  }
  for (int r = 0; r < nranks; r++) {
    free(ranks[r].io[0].buf);
    free(ranks[r].io[1].buf);
  }
  free(ranks);
  free(pfds);
  if (bind_loaded) sc_topo_free(&bind_topo);
  free(pstreams);
  free(extra_env);
  netbed_free(netbed);
  return code;
}
