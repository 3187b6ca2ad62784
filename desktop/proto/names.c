/* The names every process of deskgate agrees on (desktop/proto/proto.h):
 * this process's instance, session ids, desktop profiles and sizes. Each
 * end of a channel checks them with these same functions.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "desktop/proto/proto.h"

/* ---- the instance ---- */

static char instance_id[DG_INSTANCE_MAX + 1];

bool dg_instance_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	if (n == 0 || n > DG_INSTANCE_MAX || strncmp(id, "jail-", 5) == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || c != '-'))
			return false;
	}
	return true;
}

int dg_instance_set(const char *id, struct dg_err *err)
{
	if (!dg_instance_valid(id)) {
		char shown[DG_SHOW_BUF];
		dg_show_str(id ? id : "", DG_SHOW_MAX, true, shown, sizeof(shown));
		return dg_err_set(err, -EINVAL,
				  "instance %s is not a valid name: 1 to %d of [a-z0-9-], "
				  "starting with a letter or digit, not with \"jail-\"",
				  shown, DG_INSTANCE_MAX);
	}
	strcpy(instance_id, id);
	return 0;
}

/* The host name as an instance name, or "" when nothing of it is usable. */
static void instance_from_hostname(char *out)
{
	char host[256] = "";
	out[0] = '\0';
	if (gethostname(host, sizeof(host) - 1) != 0)
		return;
	size_t n = 0;
	for (const char *p = host; *p && n < DG_INSTANCE_MAX; p++) {
		char c = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && n == 0)
			continue;
		out[n++] = alnum ? c : '-';
	}
	out[n] = '\0';
	if (!dg_instance_valid(out))
		out[0] = '\0';
}

int dg_instance_init(struct dg_err *err)
{
	const char *env = getenv(DG_INSTANCE_ENV);
	if (env)
		return dg_instance_set(env, err);
	instance_from_hostname(instance_id);
	if (!instance_id[0])
		strcpy(instance_id, DG_INSTANCE_FALLBACK);
	return 0;
}

const char *dg_instance(void)
{
	if (!instance_id[0] && dg_instance_init(NULL) != 0)
		strcpy(instance_id, DG_INSTANCE_FALLBACK);
	return instance_id;
}

uint32_t dg_instance_uid_of(const char *id)
{
	uint32_t h = 2166136261u; /* FNV-1a, 32 bits */
	for (const unsigned char *p = (const unsigned char *)id; *p; p++)
		h = (h ^ *p) * 16777619u;
	return DG_INSTANCE_ID_BASE + 2u * (h % DG_INSTANCE_IDS);
}

uint32_t dg_instance_gateway_uid(void)
{
	return dg_instance_uid_of(dg_instance());
}

uint32_t dg_instance_egress_uid(void)
{
	return dg_instance_uid_of(dg_instance()) + 1u;
}

/* ---- sessions ---- */

bool dg_session_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > DG_SESSION_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

/* ---- desktop profiles and sizes ---- */

static const char *const profile_names[] = {"xterm", "browser"};

int dg_profile_parse(const char *name, enum dg_profile *p)
{
	for (size_t i = 0; i < sizeof(profile_names) / sizeof(profile_names[0]); i++) {
		if (strcmp(name, profile_names[i]) == 0) {
			*p = (enum dg_profile)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *dg_profile_name(enum dg_profile p)
{
	return (unsigned)p < sizeof(profile_names) / sizeof(profile_names[0]) ? profile_names[p] : "?";
}

int dg_desktop_parse_size(const char *text, int *w, int *h, struct dg_err *err)
{
	char *end;
	errno = 0;
	long x = strtol(text, &end, 10);
	if (end == text || *end != 'x' || errno)
		return dg_err_set(err, -EINVAL, "size \"%.32s\": expected WIDTHxHEIGHT", text);
	const char *hs = end + 1;
	long y = strtol(hs, &end, 10);
	if (end == hs || *end != '\0' || errno)
		return dg_err_set(err, -EINVAL, "size \"%.32s\": expected WIDTHxHEIGHT", text);
	if (x < DG_DESKTOP_WIDTH_MIN || x > DG_DESKTOP_WIDTH_MAX || y < DG_DESKTOP_HEIGHT_MIN ||
	    y > DG_DESKTOP_HEIGHT_MAX)
		return dg_err_set(err, -ERANGE, "size %ldx%ld is outside %dx%d .. %dx%d", x, y,
				  DG_DESKTOP_WIDTH_MIN, DG_DESKTOP_HEIGHT_MIN, DG_DESKTOP_WIDTH_MAX,
				  DG_DESKTOP_HEIGHT_MAX);
	*w = (int)x;
	*h = (int)y;
	return 0;
}
