/* deskgate-probe, resources: fork bombs, memory, CPU, output floods, daemons that
 * outlive their session, and the liveness probes (alive, hello). */

#include "cli/probe-priv.h"

/* ---------------------------------------------------------- resources */

/* forkbomb CAP HOLD_MS: forks children that wait, until fork fails or 2*CAP
 * children exist; prints "HOLDING <n>" and holds them HOLD_MS (the test
 * checks that the host stays responsive meanwhile), then kills them.
 * Contained when fork failed before CAP children. */
int p_forkbomb(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: forkbomb CAP HOLD_MS");
	long cap = parse_long(argv[0], 1, 4096, "cap");
	long hold = parse_long(argv[1], 0, 60000, "hold");
	long max = 2 * cap;
	pid_t *kids = calloc((size_t)max, sizeof(pid_t));
	if (!kids)
		return error_out("out of memory");
	long n = 0;
	int err = 0;
	pid_t self = getpid();
	fflush(NULL);
	while (n < max) {
		pid_t p = fork();
		if (p < 0) {
			err = errno;
			break;
		}
		if (p == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self)
				_exit(0);
			for (;;)
				pause();
		}
		kids[n++] = p;
	}
	printf("HOLDING %ld\n", n);
	fflush(stdout);
	struct timespec ts = {hold / 1000, (hold % 1000) * 1000000};
	nanosleep(&ts, NULL);
	for (long i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	for (long i = 0; i < n; i++)
		waitpid(kids[i], NULL, 0);
	free(kids);
	if (err)
		note("fork failed after %ld children: %s (cap %ld)", n, en(err), cap);
	else
		note("forked %ld children without a failure (cap %ld)", n, cap);
	return finish(!err || n >= cap);
}

/* memhog MB: allocates and touches MB MiB, printing progress every 16 MiB.
 * Inside a jail with a lower memory limit it is OOM-killed (the test checks
 * the exit and the reason); leaked when all of it was touched. */
int p_memhog(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: memhog MB");
	long mb = parse_long(argv[0], 1, 1 << 16, "MB");
	for (long i = 0; i < mb; i++) {
		char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);
		if (p == MAP_FAILED) {
			note("allocation failed after %ld MiB: %s", i, en(errno));
			return finish(false);
		}
		memset(p, (int)(i & 0xff) | 1, 1 << 20);
		if ((i + 1) % 16 == 0) {
			printf("touched %ld MiB\n", i + 1);
			fflush(stdout);
		}
	}
	note("allocated and touched %ld MiB", mb);
	return finish(true);
}

/* Where spinning work goes, so the compiler keeps it. */
static volatile unsigned long spin_sink;

/* Spins until t0 + ms of wall time; returns the wall time spun. */
static double spin_until(double t0, long ms)
{
	double t1;
	do {
		for (int i = 0; i < 100000; i++)
			spin_sink += (unsigned long)i;
		t1 = now_s();
	} while (t1 - t0 < (double)ms / 1000.0);
	return t1 - t0;
}

#define CPUSPIN_PROCS_MAX 64

/* cpuspin MS MAX_RATIO [PROCS]: spins MS milliseconds of wall time in PROCS
 * processes at once (default 1: this one); the ratio of their CPU time to
 * the wall time shows the CPU limit. Contained when <= MAX_RATIO. One
 * spinner can never use more than one core, so a quota of N cores is only
 * seen to hold with more than N spinners on a machine with more than N. */
int p_cpuspin(int argc, char **argv)
{
	if (argc < 2)
		return error_out("usage: cpuspin MS MAX_RATIO [PROCS]");
	long ms = parse_long(argv[0], 1, 600000, "MS");
	double max = strtod(argv[1], NULL);
	long procs = argc > 2 ? parse_long(argv[2], 1, CPUSPIN_PROCS_MAX, "PROCS") : 1;
	double t0 = now_s(), wall;
	double cpu;
	if (procs == 1) {
		struct timespec c0, c1;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
		wall = spin_until(t0, ms);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
		cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
	} else {
		pid_t kids[CPUSPIN_PROCS_MAX];
		long n = 0;
		pid_t self = getpid();
		fflush(NULL);
		for (; n < procs; n++) {
			kids[n] = fork();
			if (kids[n] < 0)
				break;
			if (kids[n] == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				if (getppid() != self)
					_exit(0);
				spin_until(t0, ms);
				_exit(0);
			}
		}
		for (long i = 0; i < n; i++)
			waitpid(kids[i], NULL, 0);
		wall = now_s() - t0;
		struct rusage ru;
		getrusage(RUSAGE_CHILDREN, &ru);
		cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
		if (n < procs)
			note("only %ld of %ld spinners started", n, procs);
	}
	double ratio = cpu / wall;
	note("%ld spinner(s): cpu %.3f s over %.3f s wall: ratio %.2f (max %.2f)", procs, cpu, wall,
	     ratio, max);
	return finish(ratio > max);
}

/* flood BYTES: writes BYTES to stdout; the verdict goes to stderr. Contained
 * when a write failed (the relay closed the pipe at its cap) before all of
 * it was written. */
int p_flood(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: flood BYTES");
	verdict_fd = 2;
	long total = parse_long(argv[0], 1, 1L << 34, "bytes");
	signal(SIGPIPE, SIG_IGN);
	static char chunk[65536];
	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = (i % 64 == 63) ? '\n' : 'y';
	long done = 0;
	while (done < total) {
		size_t want = (size_t)(total - done) < sizeof(chunk) ? (size_t)(total - done)
								     : sizeof(chunk);
		ssize_t k = write(1, chunk, want);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			note("write failed after %ld byte(s): %s", done, en(errno));
			return finish(false);
		}
		done += k;
	}
	note("wrote all %ld byte(s)", done);
	return finish(true);
}

/* daemon TAG SECS keep|close: double-forks a setsid daemon named "dgd-TAG"
 * (its comm) that sleeps SECS seconds, then exits at once. With "keep" the
 * daemon holds stdout and stderr open (what a hostile one would do); with
 * "close" it points them at /dev/null. From inside, a daemon that outlives
 * its parent has always escaped it: the final line is LEAKED with its pid.
 * Whether it outlived the jail is for `alive TAG`, run on the host after. */
int p_daemon(int argc, char **argv)
{
	if (argc < 3)
		return error_out("usage: daemon TAG SECS keep|close");
	long secs = parse_long(argv[1], 1, 3600, "secs");
	bool keep = strcmp(argv[2], "keep") == 0;
	char comm[16];
	snprintf(comm, sizeof(comm), "dgd-%s", argv[0]);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return error_out("pipe: %s", en(errno));
	fflush(NULL);
	pid_t c = fork();
	if (c < 0)
		return error_out("fork: %s", en(errno));
	if (c == 0) {
		setsid();
		pid_t g = fork();
		if (g != 0)
			_exit(g < 0);
		prctl(PR_SET_NAME, comm);
		if (!keep) {
			int null = open("/dev/null", O_RDWR);
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		pid_t me = getpid();
		if (write(p[1], &me, sizeof(me)) != (ssize_t)sizeof(me))
			_exit(1);
		close(p[1]);
		close(p[0]);
		struct timespec ts = {secs, 0};
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[1]);
	pid_t d = 0;
	ssize_t k = read(p[0], &d, sizeof(d));
	close(p[0]);
	int st;
	waitpid(c, &st, 0);
	if (k != (ssize_t)sizeof(d))
		return error_out("daemon did not start");
	note("daemon %s pid %d running after its parent exited", comm, (int)d);
	return finish(true);
}

/* alive TAG: (run on the host) leaked when any process named "dgd-TAG" is
 * alive; lists their host pids. */
int p_alive(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: alive TAG");
	char want[16];
	snprintf(want, sizeof(want), "dgd-%s", argv[0]);
	DIR *d = opendir("/proc");
	if (!d)
		return error_out("/proc: %s", en(errno));
	bool leaked = false;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		char path[300], comm[64] = "", state = '?';
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		/* pid (comm) state ... ; comm has no ')' here */
		if (fscanf(f, "%*d (%63[^)]) %c", comm, &state) == 2 && strcmp(comm, want) == 0 &&
		    state != 'Z' && state != 'X') {
			note("pid %s (%s) alive, state %c", e->d_name, comm, state);
			leaked = true;
		}
		fclose(f);
	}
	closedir(d);
	if (!leaked)
		note("no process named %s", want);
	return finish(leaked);
}

/* hello: a static binary runs; prints who it runs as. Not a containment
 * probe: exit 0. */
int p_hello(int argc, char **argv)
{
	(void)argc, (void)argv;
	printf("HELLO uid=%u gid=%u pid=%d\n", (unsigned)getuid(), (unsigned)getgid(),
	       (int)getpid());
	return 0;
}

/* nice MIN: the jail runs at MIN or above (its priority below the control
 * plane's) and cannot raise its priority back: leaked when its nice value
 * is below MIN, or setpriority to one step lower succeeds. */
int p_nice(int argc, char **argv)
{
	if (argc < 1)
		return error_out("usage: nice MIN");
	long min = parse_long(argv[0], -20, 19, "MIN");
	errno = 0;
	int cur = getpriority(PRIO_PROCESS, 0);
	if (cur == -1 && errno)
		return error_out("getpriority: %s", strerror(errno));
	bool leaked = cur < min;
	note("nice %d (at least %ld wanted)", cur, min);
	if (cur > -20) {
		if (setpriority(PRIO_PROCESS, 0, cur - 1) == 0) {
			leaked = true;
			note("setpriority %d: allowed", cur - 1);
		} else {
			note("setpriority %d: %s", cur - 1, strerror(errno));
		}
	}
	return finish(leaked);
}
