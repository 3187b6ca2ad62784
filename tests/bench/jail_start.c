/* Benchmark: how long `deskgate exec -- /bin/true` takes, against
 * `unshare --user --map-root-user --mount --pid --net --ipc --uts --fork
 * /bin/true` measured in the same run (runs interleaved, so machine noise
 * hits both alike). Prints medians and the ratio. Not a timed test.
 *
 * usage: jail_start [RUNS] [DESKGATE]   (defaults: 60, the build's deskgate)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUNS_DEFAULT 60
#define RUNS_MAX 10000
#define WARMUP 3

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs argv to completion with output discarded; returns seconds or -1. */
static double run_once(char *const argv[])
{
	double t0 = now();
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "jail_start: %s failed (status %d)\n", argv[0], st);
		return -1;
	}
	return now() - t0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	int i = (int)(p * (n - 1) + 0.5);
	return v[i];
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : RUNS_DEFAULT;
	const char *dg = argc > 2 ? argv[2] : DG_BIN;
	if (runs < 1 || runs > RUNS_MAX) {
		fprintf(stderr, "jail_start: RUNS must be 1..%d\n", RUNS_MAX);
		return 2;
	}
	char *deskgate[] = {(char *)dg, "exec", "--", "/bin/true", NULL};
	char *unshare[] = {"/usr/bin/unshare", "--user", "--map-root-user", "--mount", "--pid",
			   "--net", "--ipc", "--uts", "--fork", "/bin/true", NULL};
	double *a = calloc((size_t)runs, sizeof(double));
	double *b = calloc((size_t)runs, sizeof(double));
	if (!a || !b)
		return 1;
	for (int i = 0; i < WARMUP; i++) {
		if (run_once(deskgate) < 0 || run_once(unshare) < 0)
			return 1;
	}
	for (int i = 0; i < runs; i++) {
		if ((a[i] = run_once(deskgate)) < 0 || (b[i] = run_once(unshare)) < 0)
			return 1;
	}
	double a50 = pct(a, runs, 0.5), a90 = pct(a, runs, 0.9);
	double b50 = pct(b, runs, 0.5), b90 = pct(b, runs, 0.9);
	printf("jail_start: %d runs each, interleaved\n", runs);
	printf("%-44s median %7.2f ms   p90 %7.2f ms\n", "deskgate exec -- /bin/true", a50 * 1e3,
	       a90 * 1e3);
	printf("%-44s median %7.2f ms   p90 %7.2f ms\n", "unshare -U -r -m -p -n -i -u -f /bin/true",
	       b50 * 1e3, b90 * 1e3);
	printf("ratio deskgate/unshare (median): %.2fx   (target: <= 2x and < 20 ms)\n", a50 / b50);
	free(a);
	free(b);
	return 0;
}
