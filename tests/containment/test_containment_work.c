/* Allowed work still works: the jail is not so tight that ordinary code
 * fails. Shell and Python scripts compute and write in /tmp and $HOME,
 * programs read /usr, and a static binary runs, as uid 1000. */
#include <sys/stat.h>

#include "containment.h"

DG_CONTAINMENT_MAIN

static void expect_ok(const char *what, const struct dg_run *r, const char *want_out)
{
	cr_expect(!r->timed_out, "%s timed out", what);
	cr_expect_eq(r->exit_code, 0, "%s: exit %d, stderr: %.*s", what, r->exit_code, SHOW, r->err);
	cr_expect_str_eq(r->out, want_out, "%s printed '%s'", what, r->out);
}

Test(work, sh_script)
{
	struct dg_run r;
	jail_run(NULL,
		 ARGV("/bin/sh", "-c",
		      "x=$((6 * 7)) && echo $x > /tmp/a && echo hi > \"$HOME/b\" && "
		      "mkdir -p \"$HOME/d/e\" && cat /tmp/a \"$HOME/b\" && "
		      "rm /tmp/a \"$HOME/b\" && test -d \"$HOME/d/e\" && echo done"),
		 PROBE_TIMEOUT, &r);
	expect_ok("sh", &r, "42\nhi\ndone\n");
	dg_run_free(&r);
	assert_no_leftovers("sh");
}

Test(work, python_script)
{
	static const char py[] =
		"import os, json, hashlib\n"
		"home = os.environ['HOME']\n"
		"open('/tmp/n.json', 'w').write(json.dumps(sum(range(10))))\n"
		"open(os.path.join(home, 'h'), 'w').write(hashlib.sha256(b'abc').hexdigest()[:8])\n"
		"print(json.load(open('/tmp/n.json')), open(os.path.join(home, 'h')).read(),\n"
		"      os.getuid(), home)\n";
	struct dg_run r;
	jail_run(NULL, ARGV("/usr/bin/python3", "-c", py), PROBE_TIMEOUT, &r);
	expect_ok("python3", &r, "45 ba7816bf 1000 /home/user\n");
	dg_run_free(&r);
	assert_no_leftovers("python3");
}

#define GPL3 "/usr/share/common-licenses/GPL-3"

Test(work, read_usr)
{
	struct stat st;
	cr_assert_eq(stat(GPL3, &st), 0, "%s missing on the host", GPL3);
	char want[32];
	snprintf(want, sizeof(want), "%lld\n", (long long)st.st_size);
	struct dg_run r;
	jail_run(NULL, ARGV("/bin/sh", "-c", "cat " GPL3 " | wc -c"), PROBE_TIMEOUT, &r);
	expect_ok("cat | wc", &r, want);
	dg_run_free(&r);
	assert_no_leftovers("cat | wc");
}

/* The probe itself: static, written into /tmp and run from there. */
Test(work, static_binary)
{
	struct dg_run r;
	leftovers_snapshot();
	cr_assert_eq(dg_test_probe_jail(NULL, NULL, -1, PROBE_TIMEOUT, ARGV("hello"), &r), 0);
	show_run("hello", &r);
	cr_expect_eq(r.exit_code, 0, "exit %d, stderr: %.*s", r.exit_code, SHOW, r.err);
	cr_expect(strstr(r.out, "HELLO uid=1000 gid=1000"), "printed '%s'", r.out);
	dg_run_free(&r);
	assert_no_leftovers("hello");
}
