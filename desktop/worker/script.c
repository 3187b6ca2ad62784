/* script: the javascript action (see script-priv.h for the contract).
 *
 * Steps, each a DevTools command on the current page's session whose reply
 * starts the next:
 *   run        Runtime.evaluate of the code (replMode, awaitPromise), the
 *              value kept as a remote object in DG_SCRIPT_GROUP;
 *   serialize  for a plain object or array only: Runtime.callFunctionOn it
 *              with SERIALIZE, which answers [its JSON cut, its length]
 *              by value, so the reply stays small whatever the object;
 * then Runtime.releaseObjectGroup, unanswered.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "desktop/worker/script-priv.h"

/* Runs in the page with the value as `this`: its JSON, cut at max UTF-16
 * units (a cut surrogate pair dropped whole: a lone surrogate would make
 * the reply invalid JSON for the worker), and the whole length; null when
 * it does not serialize. */
static const char SERIALIZE[] =
	"function (max) {\n"
	"  let s;\n"
	"  try { s = JSON.stringify(this); } catch (e) { return null; }\n"
	"  if (typeof s !== 'string') return null;\n"
	"  const n = s.length;\n"
	"  if (n > max) {\n"
	"    s = s.slice(0, max);\n"
	"    const last = s.charCodeAt(s.length - 1);\n"
	"    if (last >= 0xd800 && last < 0xdc00) s = s.slice(0, -1);\n"
	"  }\n"
	"  return [s, n];\n"
	"}";

static void end(struct dg_script *s, const char *text, const char *error)
{
	s->busy = false;
	s->gen++;
	json_decref(s->value);
	s->value = NULL;
	/* The run's remote objects (its value, an exception) are let go. */
	if (dg_cdp_ready(s->cdp) && strcmp(dg_cdp_session_id(s->cdp), s->session) == 0)
		dg_cdp_send(s->cdp, "Runtime.releaseObjectGroup",
			    json_pack("{s:s}", "objectGroup", DG_SCRIPT_GROUP), s->session, NULL, NULL,
			    NULL);
	s->done(s->arg, text, error);
}

static void fail(struct dg_script *s, const char *fmt, const char *detail)
{
	snprintf(s->error, sizeof(s->error), fmt, detail ? detail : "");
	end(s, NULL, s->error);
}

/* Answers text (len bytes of UTF-8), cut at DG_SCRIPT_ANSWER_MAX
 * characters with the note; whole says the value was longer than what
 * came (cut in the page already). */
static void answer(struct dg_script *s, const char *text, size_t len, bool whole)
{
	static const char note[] = "\n[the value was cut at %d characters]";
	size_t chars = 0, i = 0;
	for (; i < len; i++) {
		if (((unsigned char)text[i] & 0xc0) != 0x80 && chars++ == DG_SCRIPT_ANSWER_MAX)
			break;
	}
	bool cut = i < len || !whole;
	char *out = malloc(i + sizeof(note) + 16);
	if (!out) {
		fail(s, "the script ran, but its value could not be kept: %s", "out of memory");
		return;
	}
	memcpy(out, text, i);
	if (cut)
		snprintf(out + i, sizeof(note) + 16, note, DG_SCRIPT_ANSWER_MAX);
	else
		out[i] = '\0';
	end(s, out, NULL);
	free(out);
}

static void answer_str(struct dg_script *s, const char *text)
{
	answer(s, text, strlen(text), true);
}

/* The run a reply belongs to, or NULL when it ended meanwhile. */
static struct dg_script *claim(void *arg, int status)
{
	uint64_t gen;
	struct dg_script *s = dg_cdp_claim(arg, status, &gen);
	return s && s->busy && s->gen == gen ? s : NULL;
}

static bool is(const char *a, const char *b)
{
	return a && strcmp(a, b) == 0;
}

/* A remote object by its description (className, type as fallbacks). */
static void answer_description(struct dg_script *s, json_t *o)
{
	const char *d = json_string_value(json_object_get(o, "description"));
	if (!d)
		d = json_string_value(json_object_get(o, "className"));
	if (!d)
		d = json_string_value(json_object_get(o, "type"));
	answer_str(s, d ? d : "?");
}

static void serialized(void *arg, int status, json_t *result, const char *error_message)
{
	(void)error_message;
	struct dg_script *s = claim(arg, status);
	if (!s)
		return;
	json_t *v = json_object_get(json_object_get(result, "result"), "value");
	json_t *js = json_array_get(v, 0), *n = json_array_get(v, 1);
	if (status == 0 && !json_object_get(result, "exceptionDetails") && json_is_string(js) &&
	    json_is_number(n))
		answer(s, json_string_value(js), json_string_length(js),
		       json_number_value(n) <= (double)DG_SCRIPT_ANSWER_MAX);
	else /* a cycle, a BigInt inside, a page that broke JSON.stringify */
		answer_description(s, s->value);
}

/* The description of a thrown value: an error's stack, a primitive's text. */
static void threw(struct dg_script *s, json_t *details)
{
	json_t *e = json_object_get(details, "exception");
	const char *d = json_string_value(json_object_get(e, "description"));
	json_t *v = json_object_get(e, "value");
	char *dumped = NULL;
	if (!d && json_is_string(v))
		d = json_string_value(v);
	if (!d && v)
		d = dumped = json_dumps(v, JSON_ENCODE_ANY);
	if (!d)
		d = json_string_value(json_object_get(details, "text"));
	if (!d)
		d = "an exception without a description";
	/* Cut at a character boundary, within the bound. */
	size_t n = strlen(d);
	if (n > DG_SCRIPT_ERROR_MAX) {
		n = DG_SCRIPT_ERROR_MAX;
		while (n > 0 && ((unsigned char)d[n] & 0xc0) == 0x80)
			n--;
	}
	snprintf(s->error, sizeof(s->error), "the script threw: %.*s%s", (int)n, d,
		 n < strlen(d) ? "\xe2\x80\xa6" : "");
	free(dumped);
	end(s, NULL, s->error);
}

static void ran(void *arg, int status, json_t *result, const char *error_message)
{
	struct dg_script *s = claim(arg, status);
	if (!s)
		return;
	if (status != 0) {
		/* Runtime.evaluate's timeout ends a loop with an "Internal error"
		 * reply (Chromium 156): said as what it is. */
		if (dg_now_ms() - s->t0 >= DG_SCRIPT_TIMEOUT_MS - 50)
			snprintf(s->error, sizeof(s->error),
				 "the script ran longer than %d ms and was stopped",
				 DG_SCRIPT_TIMEOUT_MS);
		else if (status == -ECONNRESET)
			snprintf(s->error, sizeof(s->error),
				 "the page went away while the script ran (%.300s)",
				 error_message ? error_message : "");
		else
			snprintf(s->error, sizeof(s->error), "the script could not run: %.300s",
				 error_message ? error_message : "no reason given");
		end(s, NULL, s->error);
		return;
	}
	json_t *details = json_object_get(result, "exceptionDetails");
	if (details) {
		threw(s, details);
		return;
	}
	json_t *o = json_object_get(result, "result");
	const char *type = json_string_value(json_object_get(o, "type"));
	const char *sub = json_string_value(json_object_get(o, "subtype"));
	json_t *value = json_object_get(o, "value");
	const char *unser = json_string_value(json_object_get(o, "unserializableValue"));
	const char *oid = json_string_value(json_object_get(o, "objectId"));
	if (!type) {
		fail(s, "the script ran, but the browser answered %s", "no value");
	} else if (is(type, "undefined")) {
		answer_str(s, "undefined");
	} else if (unser) { /* NaN, Infinity, -0, 1n */
		answer_str(s, unser);
	} else if (is(type, "object") && is(sub, "null")) {
		answer_str(s, "null");
	} else if ((is(type, "string") || is(type, "number") || is(type, "boolean")) && value) {
		char *j = json_dumps(value, JSON_ENCODE_ANY);
		if (is(type, "number") && json_string_value(json_object_get(o, "description"))) {
			free(j); /* the browser's own writing of it: 0.1, not 0.10000000000000001 */
			j = strdup(json_string_value(json_object_get(o, "description")));
		}
		if (j)
			answer_str(s, j);
		else
			fail(s, "the script ran, but its value could not be kept: %s", "out of memory");
		free(j);
	} else if (is(type, "object") && (!sub || is(sub, "array")) && oid) {
		json_t *p = json_pack("{s:s, s:s, s:[{s:i}], s:b, s:s}", "objectId", oid,
				      "functionDeclaration", SERIALIZE, "arguments", "value",
				      DG_SCRIPT_ANSWER_MAX, "returnByValue", 1, "objectGroup",
				      DG_SCRIPT_GROUP);
		s->value = json_incref(o); /* for the fallback */
		if (!p || !dg_cdp_page_send(s->cdp, "Runtime.callFunctionOn", p, serialized, s, s->gen))
			answer_description(s, o);
	} else {
		answer_description(s, o);
	}
}

int dg_script_run(struct dg_script *s, struct dg_cdp *cdp, const char *code,
		  dg_script_done_fn done, void *arg, struct dg_err *err)
{
	if (s->busy)
		return dg_err_set(err, -EBUSY, "javascript: another script is running");
	if (!code || !code[0])
		return dg_err_set(err, -EINVAL, "javascript: no code");
	if (!cdp || !dg_cdp_ready(cdp))
		return dg_err_set(err, -EAGAIN, "javascript: no page is attached yet");
	json_t *p = json_pack("{s:s, s:b, s:b, s:b, s:b, s:i, s:s}", "expression", code, "replMode", 1,
			      "awaitPromise", 1, "returnByValue", 0, "userGesture", 1, "timeout",
			      DG_SCRIPT_TIMEOUT_MS, "objectGroup", DG_SCRIPT_GROUP);
	if (!p)
		return dg_err_set(err, -EINVAL, "javascript: the code is not UTF-8 text");
	s->cdp = cdp;
	s->gen++;
	snprintf(s->session, sizeof(s->session), "%s", dg_cdp_session_id(cdp));
	if (!dg_cdp_page_send(cdp, "Runtime.evaluate", p, ran, s, s->gen))
		return dg_err_set(err, -EAGAIN, "javascript: the page's session is gone");
	s->busy = true;
	s->done = done;
	s->arg = arg;
	s->t0 = dg_now_ms();
	s->deadline = s->t0 + DG_SCRIPT_TIMEOUT_MS + DG_SCRIPT_GRACE_MS;
	return 0;
}

int dg_script_advance(struct dg_script *s)
{
	if (!s->busy)
		return -1;
	long long now = dg_now_ms();
	if (now < s->deadline)
		return (int)(s->deadline - now);
	/* Stops a loop the evaluation's own timeout did not reach (one in a
	 * later task: after an await, in a timer); harmless when nothing runs. */
	if (dg_cdp_ready(s->cdp) && strcmp(dg_cdp_session_id(s->cdp), s->session) == 0)
		dg_cdp_send(s->cdp, "Runtime.terminateExecution", NULL, s->session, NULL, NULL, NULL);
	snprintf(s->error, sizeof(s->error),
		 "the script did not finish within %d ms (a loop was stopped; a promise that never "
		 "settles is abandoned)",
		 DG_SCRIPT_TIMEOUT_MS);
	end(s, NULL, s->error);
	return 0;
}
