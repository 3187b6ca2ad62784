/* The gateway's side of the recordings (recordings/recordings.h): the
 * signing key, orphans and retention at start, one recording per session,
 * and the events the session writes to it.
 *
 * A recording that cannot be written ends its session: a session whose
 * actions are not recorded must not go on (fail closed). The end is
 * deferred to a timer, because a write fails deep inside the session's own
 * handlers, which must not see the session vanish under them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "gateway/server-priv.h"

#define US 1000000LL

/* ---- policy text ---------------------------------------------------------- */

int dg_gw_policy_load(const char *path, struct dg_policy *p, char **text, size_t *len,
		      struct dg_err *err)
{
	*text = NULL;
	*len = 0;
	if (!path || !path[0]) {
		dg_policy_default(p);
		*text = strdup(DG_GW_BUILTIN_POLICY_TEXT);
		*len = *text ? strlen(*text) : 0;
		return *text ? 0 : dg_err_set(err, -ENOMEM, "policy: out of memory");
	}
	return dg_policy_load_text(path, p, text, len, err);
}

/* ---- at start ----------------------------------------------------------------- */

static bool is_active(const char *id, void *arg)
{
	return dg_gw_session_find(arg, id) != NULL;
}

static void report(const char *id, int rc, const char *msg, void *arg)
{
	(void)arg;
	if (rc)
		fprintf(stderr, "deskgate: recording %s: %s\n", id, msg);
	else
		fprintf(stderr, "deskgate: recording %s: %s\n", id, msg ? msg : "done");
}

/* Local retention. With an object store, a recording not yet confirmed in
 * the bucket is its only copy: retention_days and retention_mb yield to it
 * (docs/recordings.md: kept locally until the upload is confirmed), and the
 * pass says so in the log and in /metrics (held, over budget) rather than
 * lose it while the store is down. */
static void retention_pass(struct gw *gw)
{
	struct dg_rec_retention_opts o = {
		.max_age_s = (int64_t)gw->cfg.limits.retention_days * 86400,
		.max_total_bytes = (uint64_t)gw->cfg.limits.retention_mb * 1024 * 1024,
		.keep_unuploaded = gw->cfg.object_store.store[0] != '\0',
		.pass = {is_active, report, gw},
	};
	struct dg_rec_retention_result res;
	struct dg_err err = {{0}};
	dg_gw_bucket_retention(gw);
	if (dg_rec_retention(gw->cfg.recordings, &o, &res, &err) != 0) {
		fprintf(stderr, "deskgate: retention: %s\n", err.msg);
		return;
	}
	gw->m.retention_held = res.held;
	gw->m.retention_over_budget = res.over_budget;
	if (res.deleted || res.failed || res.over_budget)
		fprintf(stderr, "deskgate: retention: %u of %u recordings deleted, %u failed%s\n",
			res.deleted, res.recordings, res.failed,
			!res.over_budget ? ""
			: res.held ? "; live recordings and those not yet uploaded exceed retention_mb"
				   : "; live recordings alone exceed retention_mb");
	if (res.held)
		fprintf(stderr, "deskgate: retention: %u recordings (%llu bytes) due for deletion are "
				"kept: not yet uploaded to the object store, they are its only copy%s\n",
			res.held, (unsigned long long)res.bytes_held,
			res.over_budget ? "; the recordings directory stays over retention_mb until they are"
					: "");
}

int dg_gw_rec_start(struct gw *gw, struct dg_err *err)
{
	int r = dg_rec_key_load_or_create(gw->cfg.state_dir, &gw->rec_key, err);
	if (r)
		return r;
	unsigned sealed = 0, failed = 0;
	struct dg_rec_pass pass = {is_active, report, gw};
	struct dg_err e2 = {{0}};
	if (dg_rec_seal_orphans(gw->cfg.recordings, gw->rec_key, &pass, &sealed, &failed, &e2) != 0)
		fprintf(stderr, "deskgate: sealing the recordings a previous run left: %s\n", e2.msg);
	else if (sealed || failed)
		fprintf(stderr, "deskgate: %u recordings of a previous run sealed after its crash, "
				"%u could not be\n", sealed, failed);
	retention_pass(gw);
	return dg_gw_bucket_start(gw, err);
}

static void on_retention(lws_sorted_usec_list_t *sul)
{
	struct gw *gw = (struct gw *)((char *)sul - offsetof(struct gw, sul_retention));
	retention_pass(gw);
	lws_sul_schedule(gw->ctx, 0, &gw->sul_retention, on_retention,
			 (lws_usec_t)DG_GW_RETENTION_PERIOD_S * US);
}

static void on_flush(lws_sorted_usec_list_t *sul)
{
	struct gw *gw = (struct gw *)((char *)sul - offsetof(struct gw, sul_flush));
	for (int i = 0; i < gw->n_sessions; i++) {
		struct gw_session *s = &gw->sessions[i];
		struct dg_err err = {{0}};
		if (s->used && s->rec && dg_rec_flush(s->rec, &err) != 0)
			dg_gw_rec_failed(s, err.msg);
	}
	lws_sul_schedule(gw->ctx, 0, &gw->sul_flush, on_flush,
			 (lws_usec_t)gw->cfg.limits.recording_fsync_ms * 1000);
}

void dg_gw_rec_timers(struct gw *gw)
{
	lws_sul_schedule(gw->ctx, 0, &gw->sul_retention, on_retention,
			 (lws_usec_t)DG_GW_RETENTION_PERIOD_S * US);
	dg_gw_bucket_timers(gw);
	if (gw->cfg.limits.recording_fsync_ms)
		lws_sul_schedule(gw->ctx, 0, &gw->sul_flush, on_flush,
				 (lws_usec_t)gw->cfg.limits.recording_fsync_ms * 1000);
}

void dg_gw_rec_stop(struct gw *gw)
{
	dg_gw_bucket_stop(gw);
	dg_gw_rec_cache_free(gw);
	lws_sul_cancel(&gw->sul_retention);
	lws_sul_cancel(&gw->sul_flush);
	dg_rec_key_free(gw->rec_key);
	gw->rec_key = NULL;
}

/* ---- per session ----------------------------------------------------------------- */

static void on_rec_failed(lws_sorted_usec_list_t *sul)
{
	struct gw_session *s = (struct gw_session *)((char *)sul - offsetof(struct gw_session, sul_rec));
	if (s->used)
		s->gw->session_end(s, s->rec_error[0] ? s->rec_error : "the recording failed");
}

void dg_gw_rec_failed(struct gw_session *s, const char *why)
{
	if (s->rec_broken)
		return;
	s->rec_broken = true;
	snprintf(s->rec_error, sizeof(s->rec_error), "the session's recording failed: %s", why);
	lwsl_err("deskgate: session %s: %s\n", s->id, s->rec_error);
	lws_sul_schedule(s->gw->ctx, 0, &s->sul_rec, on_rec_failed, 1);
}

/* ---- events for the recording and the observers -------------------------------- */

void dg_gw_note(struct gw_session *s, json_t *ev)
{
	dg_gw_rec_event(s, ev);
	dg_gw_broadcast(s, ev);
}

/* Ties a browser or egress decision to the action that led to it: the
 * number of the action running (1-based, as the recording counts them), or
 * null when the page acted on its own between actions. Decisions go to the
 * agent too when its hello asked for them. */
void dg_gw_note_decision(struct gw_session *s, json_t *ev)
{
	json_object_set_new(ev, "during_action",
			    s->cur && !s->appr.pending ? json_integer((json_int_t)s->n_actions) : json_null());
	const char *type = json_string_value(json_object_get(ev, "type"));
	if (type && strcmp(type, "decision") == 0)
		dg_gw_agent_event(s, DG_AGENT_EVENT_DECISION, json_incref(ev));
	dg_gw_note(s, ev);
}

int dg_gw_rec_open(struct gw_session *s, struct dg_err *err)
{
	struct gw *gw = s->gw;
	struct dg_rec_meta meta = {
		.id = s->id,
		.profile = dg_profile_name(s->profile),
		.width = s->width,
		.height = s->height,
		.token_name = s->owner,
		.policy_text = s->policy_text,
		.policy_len = s->policy_len,
	};
	struct dg_rec_opts o = {
		.fsync = gw->cfg.limits.recording_fsync_ms ? DG_REC_FSYNC_INTERVAL : DG_REC_FSYNC_EVERY,
		.fsync_interval_ms = gw->cfg.limits.recording_fsync_ms,
		.redact_text = s->policy.redact_text,
	};
	return dg_rec_open(gw->cfg.recordings, &meta, &o, &s->rec, err);
}

void dg_gw_rec_event(struct gw_session *s, const json_t *ev)
{
	if (!s->rec || s->rec_broken || !ev)
		return;
	struct dg_err err = {{0}};
	long long t0 = dg_now_us();
	if (dg_rec_event(s->rec, ev, &err) != 0)
		dg_gw_rec_failed(s, err.msg);
	s->gw->m.rec_us += (unsigned long)(dg_now_us() - t0);
	s->gw->m.rec_events++;
}

int dg_gw_rec_frame(struct gw_session *s, const unsigned char *png, size_t len,
		    char hash[DG_REC_HEX_LEN + 1])
{
	hash[0] = '\0';
	if (!s->rec || s->rec_broken)
		return -EPIPE;
	struct dg_err err = {{0}};
	long long t0 = dg_now_us();
	int r = dg_rec_frame(s->rec, png, len, hash, &err);
	s->gw->m.rec_us += (unsigned long)(dg_now_us() - t0);
	if (r) {
		hash[0] = '\0';
		dg_gw_rec_failed(s, err.msg);
	}
	return r;
}

void dg_gw_rec_close(struct gw_session *s, const char *reason)
{
	bool sealed = false;
	lws_sul_cancel(&s->sul_rec);
	if (!s->rec)
		return;
	if (!s->rec_broken) {
		json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "type", "lifecycle",
				       "state", "ended", "reason", reason, "actions",
				       (json_int_t)s->n_actions, "refused", (json_int_t)s->n_refused,
				       "errors", (json_int_t)s->n_errors, "requests",
				       (json_int_t)s->n_requests, "requests_blocked",
				       (json_int_t)s->n_requests_blocked);
		struct dg_err err = {{0}};
		if (dg_rec_event(s->rec, ev, &err) != 0 || dg_rec_seal(s->rec, s->gw->rec_key, &err) != 0)
			lwsl_err("deskgate: session %s: sealing its recording: %s\n", s->id, err.msg);
		else
			sealed = true;
		json_decref(ev);
	}
	dg_rec_close(s->rec);
	s->rec = NULL;
	/* Queued even when the session is still in the table: the upload
	 * waits until it is gone (bucket.c). */
	if (sealed)
		dg_gw_bucket_sealed(s->gw, s->id);
}

/* ---- reading recordings over HTTP ----------------------------------------------- */

/* session.json of ROOT/ID without what viewers must not get (the redaction
 * salt would let them test guesses against hashed text) or, with brief,
 * without the policy's text. NULL when it cannot be read. */
const char *dg_gw_rec_root(struct gw *gw, const char *id)
{
	const char *roots[2] = {gw->cfg.recordings, dg_gw_bucket_cache(gw)};
	for (int i = 0; i < 2; i++) {
		char p[DG_CONFIG_PATH_MAX + DG_REC_ID_MAX + 2];
		struct stat st;
		if (roots[i] && (size_t)snprintf(p, sizeof(p), "%s/%s", roots[i], id) < sizeof(p) &&
		    lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			return roots[i];
	}
	return NULL;
}

static json_t *session_json(struct gw *gw, const char *id, bool brief)
{
	char path[DG_CONFIG_PATH_MAX + DG_REC_ID_MAX + 32];
	const char *root = dg_gw_rec_root(gw, id);
	if (!root)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s/session.json", root, id);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	struct stat st;
	json_t *j = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= DG_REC_SESSION_MAX)
		j = json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL);
	close(fd);
	if (!json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	json_object_del(j, "redaction_salt");
	if (brief)
		json_object_del(j, "policy");
	return j;
}

/* The verify result of a recording, cached while its events file keeps its
 * size and modification time (verifying reads every event and frame). */
static json_t *verify_json(struct gw *gw, const char *id)
{
	if (dg_gw_session_find(gw, id))
		return json_pack("{s:s, s:s}", "status", "live", "message",
				 "the session is running; its recording is sealed when it ends");
	char dir[DG_CONFIG_PATH_MAX + DG_REC_ID_MAX + 8], ev[sizeof(dir) + 16];
	const char *root = dg_gw_rec_root(gw, id);
	snprintf(dir, sizeof(dir), "%s/%s", root ? root : gw->cfg.recordings, id);
	snprintf(ev, sizeof(ev), "%s/events.jsonl", dir);
	struct stat st;
	bool have = stat(ev, &st) == 0;
	struct gw_verify_cache *slot = NULL, *free_slot = NULL;
	for (int i = 0; i < DG_GW_VERIFY_CACHE; i++) {
		struct gw_verify_cache *c = &gw->verify_cache[i];
		if (c->id[0] && strcmp(c->id, id) == 0)
			slot = c;
		else if (!c->id[0] && !free_slot)
			free_slot = c;
	}
	if (slot && have && slot->size == st.st_size && slot->mtime_ns == st.st_mtim.tv_nsec &&
	    slot->mtime_s == st.st_mtim.tv_sec)
		return json_incref(slot->result);
	struct dg_rec_verify_result res;
	struct dg_err err = {{0}};
	json_t *out;
	if (dg_rec_verify(dir, gw->rec_key, &res, &err) != 0)
		out = json_pack("{s:s, s:s}", "status", "unreadable", "message", err.msg);
	else
		out = json_pack("{s:s, s:I, s:I, s:I, s:I, s:s}", "status",
				dg_rec_status_name(res.status), "last_seq", (json_int_t)res.last_seq,
				"bad_seq", (json_int_t)res.bad_seq, "events", (json_int_t)res.events,
				"torn_bytes", (json_int_t)res.torn_bytes, "message", res.msg);
	if (!slot)
		slot = free_slot ? free_slot : &gw->verify_cache[gw->verify_next++ % DG_GW_VERIFY_CACHE];
	json_decref(slot->result);
	snprintf(slot->id, sizeof(slot->id), "%s", id);
	slot->result = json_incref(out);
	slot->size = have ? st.st_size : -1;
	slot->mtime_s = have ? st.st_mtim.tv_sec : 0;
	slot->mtime_ns = have ? st.st_mtim.tv_nsec : 0;
	return out;
}

/* The recordings of one root into list (at most DG_GW_RECORDINGS_LIST_MAX
 * in all); the cache's skip those the recordings directory has. */
static void list_root(struct gw *gw, const char *root, bool cache, json_t *list)
{
	DIR *d = opendir(root);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && json_array_size(list) < DG_GW_RECORDINGS_LIST_MAX) {
		if (!dg_rec_id_valid(e->d_name) || (cache && dg_gw_rec_root(gw, e->d_name) != root))
			continue;
		json_t *j = session_json(gw, e->d_name, true);
		if (!j)
			continue;
		struct gw_session *s = dg_gw_session_find(gw, e->d_name);
		json_object_set_new(j, "live", json_boolean(s != NULL));
		json_object_set_new(j, "verify", verify_json(gw, e->d_name));
		if (cache)
			json_object_set_new(j, "from_bucket", json_true());
		json_array_append_new(list, j);
	}
	closedir(d);
}

json_t *dg_gw_rec_list(struct gw *gw)
{
	json_t *list = json_array();
	list_root(gw, gw->cfg.recordings, false, list);
	if (dg_gw_bucket_cache(gw))
		list_root(gw, dg_gw_bucket_cache(gw), true, list);
	return list;
}

json_t *dg_gw_rec_info(struct gw *gw, const char *id)
{
	if (!dg_rec_id_valid(id))
		return NULL;
	json_t *j = session_json(gw, id, false);
	if (!j)
		return NULL;
	json_object_set_new(j, "live", json_boolean(dg_gw_session_find(gw, id) != NULL));
	json_object_set_new(j, "verify", verify_json(gw, id));
	if (dg_gw_bucket_cache(gw) && dg_gw_rec_root(gw, id) == dg_gw_bucket_cache(gw))
		json_object_set_new(j, "from_bucket", json_true());
	return j;
}

void dg_gw_rec_cache_free(struct gw *gw)
{
	for (int i = 0; i < DG_GW_VERIFY_CACHE; i++) {
		json_decref(gw->verify_cache[i].result);
		gw->verify_cache[i].result = NULL;
		gw->verify_cache[i].id[0] = '\0';
	}
}

/* ---- policies, for viewers ---------------------------------------------------- */

/* The last `deskgate audit` of a policy: STATE_DIR/audit/<sha256 of the
 * policy's bytes>.json (see README), or NULL. */
static json_t *last_audit(struct gw *gw, const char *text, size_t len, char hex[65])
{
	unsigned char h[32];
	unsigned int hl = 0;
	hex[0] = '\0';
	if (!text || EVP_Digest(text, len, h, &hl, EVP_sha256(), NULL) != 1 || hl != 32)
		return NULL;
	dg_hex_encode(h, sizeof(h), hex);
	char path[DG_CONFIG_PATH_MAX + 128];
	snprintf(path, sizeof(path), "%s/audit/%s.json", gw->cfg.state_dir, hex);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	struct stat st;
	json_t *j = NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= DG_GW_AUDIT_FILE_MAX)
		j = json_loadfd(fd, JSON_REJECT_DUPLICATES, NULL);
	close(fd);
	if (!json_is_object(j)) {
		json_decref(j);
		return NULL;
	}
	return j;
}

static json_t *policy_entry(struct gw *gw, const char *name, const char *text, size_t len,
			    const char *error)
{
	json_t *doc = text ? json_loadb(text, len, 0, NULL) : NULL;
	json_t *e = json_pack("{s:s, s:o}", "name", name, "policy", doc ? doc : json_null());
	char hex[65];
	json_t *audit = last_audit(gw, text, len, hex);
	if (hex[0])
		json_object_set_new(e, "sha256", json_string(hex));
	if (audit)
		json_object_set_new(e, "audit", audit);
	if (error)
		json_object_set_new(e, "error", json_string(error));
	return e;
}

json_t *dg_gw_policies_json(struct gw *gw)
{
	json_t *list = json_array();
	json_array_append_new(list, policy_entry(gw, "default", gw->policy_text, gw->policy_len, NULL));
	for (size_t i = 0; i < gw->cfg.n_policies; i++) {
		const struct dg_config_policy *cp = &gw->cfg.policies[i];
		if (strcmp(cp->name, "default") == 0)
			continue;
		struct dg_policy p;
		char *text = NULL;
		size_t len = 0;
		struct dg_err err = {{0}};
		int r = dg_gw_policy_load(cp->path, &p, &text, &len, &err);
		if (r == 0)
			dg_policy_free(&p);
		json_array_append_new(list, policy_entry(gw, cp->name, text, len, r ? err.msg : NULL));
		free(text);
	}
	return list;
}
