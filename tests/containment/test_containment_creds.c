/* Containment, edge 3: ambient credentials. Whatever secrets deskgate's own
 * environment and home hold, the jail's environment has only the allowlist
 * (PATH HOME USER LOGNAME SHELL LANG TERM TZ TMPDIR), no process in it shows
 * them (/proc/1/environ included), no credential file is reachable, and the
 * kernel keyrings are out of reach. */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "containment.h"

DG_CONTAINMENT_MAIN

extern char **environ;

/* The secrets a developer's or CI's environment typically carries. Every
 * value holds the marker, which the probe looks for everywhere. */
static const char *const secret_names[] = {
	"AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN", "GITHUB_TOKEN",
	"GH_TOKEN",		 "OPENAI_API_KEY",    "ANTHROPIC_API_KEY", "HF_TOKEN",
	"NPM_TOKEN",		 "SSH_AUTH_SOCK",     "GOOGLE_APPLICATION_CREDENTIALS",
	"KUBECONFIG",		 "DOCKER_AUTH_CONFIG", "DATABASE_URL",
};
#define NSECRETS (sizeof(secret_names) / sizeof(secret_names[0]))

static char marker[64];

/* environ plus the secrets (and HOME when home is given); static storage. */
static const char *const *secret_env(const char *home)
{
	static const char *envp[1024];
	static char entries[NSECRETS + 1][256];
	size_t n = 0;
	snprintf(marker, sizeof(marker), "dg-secret-%s", test_tag());
	for (char **e = environ; *e && n < 900; e++)
		if (!home || strncmp(*e, "HOME=", 5) != 0)
			envp[n++] = *e;
	for (size_t i = 0; i < NSECRETS; i++) {
		snprintf(entries[i], sizeof(entries[i]), "%s=%s-%zu", secret_names[i], marker, i);
		envp[n++] = entries[i];
	}
	if (home) {
		snprintf(entries[NSECRETS], sizeof(entries[0]), "HOME=%s", home);
		envp[n++] = entries[NSECRETS];
	}
	envp[n] = NULL;
	return envp;
}

Test(creds, env_jail)
{
	const char *const *envp = secret_env(NULL);
	jail_contained_env(NULL, envp, -1, ARGV("env", marker));
}

Test(creds, env_control)
{
	const char *const *envp = secret_env(NULL);
	control_leaked_env(NULL, envp, -1, ARGV("env", marker));
}

/* A home like a developer's: ~/.ssh/id_ed25519 and ~/.aws/credentials. */
static char *fake_home(void)
{
	char *key = dg_test_write_tmp("id_ed25519", "not a key\n");
	char *dir = strdup(key);
	*strrchr(dir, '/') = '\0';
	char p[512];
	snprintf(p, sizeof(p), "%s/.ssh", dir);
	cr_assert(mkdir(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/.ssh/id_ed25519", dir);
	cr_assert(rename(key, p) == 0);
	snprintf(p, sizeof(p), "%s/.aws", dir);
	cr_assert(mkdir(p, 0700) == 0);
	snprintf(p, sizeof(p), "%s/.aws/credentials", dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	cr_assert(fd >= 0);
	close(fd);
	free(key);
	return dir;
}

static void remove_fake_home(char *dir)
{
	static const char *const rel[] = {".ssh/id_ed25519", ".aws/credentials", ".ssh", ".aws"};
	char p[512];
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, rel[i]);
		if (unlink(p) != 0)
			rmdir(p);
	}
	rmdir(dir);
	free(dir);
}

/* deskgate runs with HOME pointing at the fake home; the jail's HOME is its
 * own. */
Test(creds, cred_files_jail)
{
	char *home = fake_home();
	jail_contained_env(NULL, secret_env(home), -1, ARGV("cred-files"));
	remove_fake_home(home);
}

Test(creds, cred_files_control)
{
	char *home = fake_home();
	control_leaked_env(NULL, secret_env(home), -1, ARGV("cred-files"));
	remove_fake_home(home);
}

Test(creds, keyctl_jail) { jail_contained(NULL, ARGV("keyctl")); }
Test(creds, keyctl_control) { control_leaked(NULL, ARGV("keyctl")); }
