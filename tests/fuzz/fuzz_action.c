/* fuzz_action: canonical actions (actions/actions.h) from arbitrary bytes.
 *
 * The input is one action's JSON text, as an agent sends it. Checked:
 *  - dg_action_parse on a 1280x800 desktop never crashes, leaks or reads
 *    past len;
 *  - an accepted action's canonical encoding parses back, and encodes to
 *    the same bytes (the header's promise that hashes of it are stable);
 *  - dg_action_to_json agrees with dg_action_parse_obj;
 *  - the same bytes as key chords (dg_keys_parse) and as typed text
 *    (dg_text_to_keysyms), the two sub-parsers agents reach through
 *    "keys" and "text": a parsed chord list formats to a canonical string
 *    that parses to the same keysyms. */
#include <errno.h>

#include "actions/actions.h"
#include "fuzz_common.h"

#define SCREEN_W 1280
#define SCREEN_H 800

static void round_trip(const struct dg_action *a)
{
	size_t len = 0;
	char *canon = dg_action_canonical(a, &len);
	DG_FUZZ_CHECK(canon, "dg_action_canonical: out of memory");
	DG_FUZZ_CHECK(strlen(canon) == len, "canonical length %zu, strlen %zu", len, strlen(canon));

	struct dg_action b;
	struct dg_err err = {{0}};
	int r = dg_action_parse(canon, len, SCREEN_W, SCREEN_H, &b, &err);
	DG_FUZZ_CHECK(r == 0, "the canonical encoding does not parse back: %s: %s", err.msg, canon);
	size_t len2 = 0;
	char *canon2 = dg_action_canonical(&b, &len2);
	DG_FUZZ_CHECK(canon2 && len2 == len && memcmp(canon, canon2, len) == 0,
		      "the canonical encoding is not stable:\n  %s\n  %s", canon,
		      canon2 ? canon2 : "(null)");
	dg_action_free(&b);
	free(canon2);

	json_t *obj = dg_action_to_json(a);
	DG_FUZZ_CHECK(obj, "dg_action_to_json: out of memory");
	r = dg_action_parse_obj(obj, SCREEN_W, SCREEN_H, &b, &err);
	DG_FUZZ_CHECK(r == 0, "dg_action_to_json's object does not parse: %s: %s", err.msg, canon);
	dg_action_free(&b);
	json_decref(obj);
	free(canon);
}

static void keys(const uint8_t *data, size_t size)
{
	if (size > DG_ACTION_KEYS_MAX + 1)
		return;
	char *s = dg_fuzz_cstr(data, size);
	struct dg_chord chords[DG_ACTION_CHORDS_MAX], again[DG_ACTION_CHORDS_MAX];
	int n = 0, n2 = 0;
	struct dg_err err = {{0}};
	if (dg_keys_parse(s, chords, DG_ACTION_CHORDS_MAX, &n, &err) == 0) {
		char buf[DG_ACTION_KEYS_MAX + 1];
		int r = dg_keys_format(chords, n, buf, sizeof(buf));
		if (r == 0) {
			r = dg_keys_parse(buf, again, DG_ACTION_CHORDS_MAX, &n2, &err);
			DG_FUZZ_CHECK(r == 0, "formatted chords do not parse: %s: %s", err.msg, buf);
			DG_FUZZ_CHECK(n2 == n, "%d chords become %d: %s", n, n2, buf);
			for (int i = 0; i < n; i++) {
				/* Only keysyms[0..n) of a chord are set. */
				DG_FUZZ_CHECK(chords[i].n == again[i].n &&
					      memcmp(chords[i].keysyms, again[i].keysyms,
						     sizeof(uint32_t) * (size_t)chords[i].n) == 0,
					      "chord %d changes through its canonical form: %s", i, buf);
			}
		}
	}
	free(s);
}

static void text(const uint8_t *data, size_t size)
{
	uint32_t out[256];
	size_t n = 0;
	struct dg_err err = {{0}};
	char *t = dg_fuzz_dup(data, size);
	int r = dg_text_to_keysyms(t, size, out, sizeof(out) / sizeof(out[0]), &n, &err);
	DG_FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOBUFS, "dg_text_to_keysyms: %d", r);
	if (r == 0)
		DG_FUZZ_CHECK(n <= sizeof(out) / sizeof(out[0]), "wrote %zu keysyms", n);
	free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy: jansson reads by length, and the parser must
	 * not look past it. */
	char *json = dg_fuzz_dup(data, size);
	struct dg_action a;
	struct dg_err err = {{0}};
	int r = dg_action_parse(json, size, SCREEN_W, SCREEN_H, &a, &err);
	DG_FUZZ_CHECK(r == 0 || r == -EINVAL || r == -E2BIG, "dg_action_parse: %d", r);
	if (r == 0) {
		DG_FUZZ_CHECK(dg_action_type_name(a.type) != NULL, "type %d", (int)a.type);
		round_trip(&a);
	} else {
		DG_FUZZ_CHECK(err.msg[0] != '\0', "refused without a message");
		DG_FUZZ_CHECK(memchr(err.msg, '\n', sizeof(err.msg)) == NULL ||
			      strchr(err.msg, '\n') == NULL,
			      "a message with a line break: %s", err.msg);
	}
	dg_action_free(&a);
	free(json);

	keys(data, size);
	text(data, size);
	return 0;
}
