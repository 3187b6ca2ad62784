/* The jail's environment: rebuilt from an allowlist, never inherited. A
 * parent holding AWS_SECRET_ACCESS_KEY or GITHUB_TOKEN passes none of it. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desktop/spawner/jail-priv.h"

/* Host variables whose value is copied when it is short and plain: they
 * change how programs print, not what they can reach. */
static const char *const copied[] = {"LANG", "TERM", "TZ"};

static bool plain_value(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || n > DG_JAIL_ENV_COPY_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];
		if (!isalnum(c) && !strchr("_.-@:/+", c))
			return false;
	}
	return true;
}

static int add(struct dg_jail_env *env, const char *name, const char *value, struct dg_err *err)
{
	if (env->n >= DG_JAIL_ENV_SLOTS - 1)
		return dg_err_set(err, -E2BIG, "jail env: more than %d entries", DG_JAIL_ENV_SLOTS - 1);
	int k = snprintf(env->storage[env->n], DG_JAIL_ENV_ENTRY_MAX, "%s=%s", name, value);
	if (k < 0 || k >= DG_JAIL_ENV_ENTRY_MAX)
		return dg_err_set(err, -E2BIG, "jail env: %s is longer than %d bytes", name,
				  DG_JAIL_ENV_ENTRY_MAX - 1);
	env->vars[env->n] = env->storage[env->n];
	env->n++;
	env->vars[env->n] = NULL;
	return 0;
}

/* NAME=value with NAME in [A-Za-z_][A-Za-z0-9_]* (lowercase for http_proxy,
 * the only spelling curl reads); the value is not interpreted. */
static int valid_extra(const char *e)
{
	const char *eq = strchr(e, '=');
	if (!eq || eq == e)
		return 0;
	for (const char *p = e; p < eq; p++) {
		if (!(isalpha((unsigned char)*p) || *p == '_' || (p > e && isdigit((unsigned char)*p))))
			return 0;
	}
	return 1;
}

int dg_jail_env_build(const struct dg_jail_prog *prog, struct dg_jail_env *env, struct dg_err *err)
{
	memset(env->vars, 0, sizeof(env->vars));
	env->n = 0;
	int r;
	if ((r = add(env, "PATH", "/usr/local/bin:/usr/bin:/bin", err)) ||
	    (r = add(env, "HOME", DG_JAIL_HOME, err)) || (r = add(env, "USER", "user", err)) ||
	    (r = add(env, "LOGNAME", "user", err)) || (r = add(env, "SHELL", "/bin/sh", err)) ||
	    (r = add(env, "TMPDIR", "/tmp", err)))
		return r;
	for (size_t i = 0; i < sizeof(copied) / sizeof(copied[0]); i++) {
		const char *v = getenv(copied[i]);
		const char *fallback = strcmp(copied[i], "LANG") == 0 ? "C.UTF-8" : NULL;
		if (v && plain_value(v))
			r = add(env, copied[i], v, err);
		else if (fallback)
			r = add(env, copied[i], fallback, err);
		if (r)
			return r;
	}
	for (int i = 0; prog->env_extra && prog->env_extra[i]; i++) {
		if (i >= DG_JAIL_ENV_MAX)
			return dg_err_set(err, -E2BIG, "jail env: more than %d extra entries",
					  DG_JAIL_ENV_MAX);
		const char *e = prog->env_extra[i];
		if (!valid_extra(e))
			return dg_err_set(err, -EINVAL, "jail env: bad entry \"%.64s\"", e);
		if (strlen(e) >= DG_JAIL_ENV_ENTRY_MAX)
			return dg_err_set(err, -E2BIG, "jail env: entry longer than %d bytes",
					  DG_JAIL_ENV_ENTRY_MAX - 1);
		if (env->n >= DG_JAIL_ENV_SLOTS - 1)
			return dg_err_set(err, -E2BIG, "jail env: too many entries");
		strcpy(env->storage[env->n], e);
		env->vars[env->n] = env->storage[env->n];
		env->vars[++env->n] = NULL;
	}
	return 0;
}
