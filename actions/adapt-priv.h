/* adapt internals shared by adapt.c (the shared checks, detection,
 * dg_adapt_parse), adapt-anthropic.c, adapt-openai.c, adapt-browser.c,
 * adapt-answer.c and adapt-mcp.c; and the base64 encoder the answers use, exposed for its tests. Not part
 * of the folder's interface: other folders include actions/actions.h only.
 */
#ifndef DG_ADAPT_PRIV_H
#define DG_ADAPT_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "actions/actions.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))
#define B(f) (1u << (f))

/* Length of the standard (RFC 4648 section 4, padded, no line breaks)
 * base64 encoding of n bytes, without the terminating NUL; (size_t)-1 when
 * it would not fit a size_t. */
size_t dg_base64_len(size_t n);

/* Writes the encoding of in[0..n) and a NUL into out, which must hold
 * dg_base64_len(n) + 1 bytes. */
void dg_base64_encode(const uint8_t *in, size_t n, char *out);

/* ---- parsing a wire message (adapt.c) ---------------------------------------- */

/* The parsing context: the scale, the cursor and where in the message we
 * are ("anthropic.input", "openai.actions[3]"), for messages. */
struct dg_adapt_ctx {
	struct dg_adapt_scale sc;  /* model size filled in */
	int cx, cy;                /* cursor, desktop space */
	char prefix[48];
	struct dg_err *err;
};

/* Records "<prefix><where>: <message>" into c->err and returns code. */
int dg_adapt_fail(struct dg_adapt_ctx *c, int code, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* true when the JSON string v is exactly s (v may hold NUL). */
bool dg_adapt_str_is(const json_t *v, const char *s);

/* v as a string (*s, *len point into it; it may hold NUL), or -EINVAL. */
int dg_adapt_string(struct dg_adapt_ctx *c, const char *where, const json_t *v, const char **s,
		    size_t *len);

/* v as an integer, or -EINVAL: an integer, or a real rounded to the
 * nearest (halves away from zero), |v| at most DG_ADAPT_REAL_MAX. */
int dg_adapt_int(struct dg_adapt_ctx *c, const char *where, const json_t *v, json_int_t *out);

/* An id: 1..DG_ADAPT_ID_MAX bytes of printable ASCII without spaces, copied
 * NUL-terminated into out (DG_ADAPT_ID_MAX + 1 bytes) when out is not NULL. */
int dg_adapt_id(struct dg_adapt_ctx *c, const char *where, const json_t *v, char *out);

/* v (0 <= v <= from) scaled from an axis of size `from` to one of size `to`,
 * rounded to the nearest (halves up); all at most DG_ACTION_SCREEN_MAX. */
long long dg_adapt_scale_axis(long long v, int from, int to);

/* A model coordinate on one axis, checked on the model display and mapped to
 * the desktop. edge: the exclusive end of a region (0 <= v <= size). */
int dg_adapt_coord(struct dg_adapt_ctx *c, const char *where, const json_t *v, bool horizontal,
		   bool edge, int *out);

/* An [x, y] pair of model coordinates, mapped to the desktop. */
int dg_adapt_pair(struct dg_adapt_ctx *c, const char *where, const json_t *v, int *x, int *y);

/* The DG_MOD_* bit of a modifier keysym (left or right), or 0. */
unsigned dg_adapt_modifier_bit(uint32_t ks);

/* The canonical modifiers array of mods (a new reference, NULL on ENOMEM). */
json_t *dg_adapt_modifiers_json(unsigned mods);

/* Canonical field -> wire field, for renaming the canonical parser's errors. */
struct dg_adapt_rename {
	const char *canon, *wire;
};

/* Checks canon (a new reference, stolen; NULL when building it ran out of
 * memory) with the canonical parser for the desktop, into *out (release
 * with dg_action_free; zeroed on error). Errors in fields named in map are
 * renamed to the wire's names ("action.text: ..." ->
 * "anthropic.input.text: ..."). */
int dg_adapt_finish(struct dg_adapt_ctx *c, json_t *canon, const struct dg_adapt_rename *map,
		    size_t n_map, struct dg_action *out);

/* A JSON object from alternating keys and new references (NULL-terminated
 * list); any NULL value makes the whole NULL. */
json_t *dg_adapt_obj(const char *key, ...);

/* Which fields one wire action allows and requires, as bits into names. */
struct dg_adapt_fields {
	const char *const *names;
	int n_names;
	const char *disc;     /* the discriminator field ("action", "type"), skipped;
			         NULL when there is none */
	const char *action;   /* the action's name, for messages */
	unsigned allowed, required;
};

/* Checks the fields present in obj: each allowed (null counts as absent),
 * each required one there. Sets *present (bits into f->names). */
int dg_adapt_check_fields(struct dg_adapt_ctx *c, const json_t *obj,
			  const struct dg_adapt_fields *f, unsigned *present);

/* The discriminator of a wire action: obj must be an object and obj[disc]
 * a string; *s, *len point into it. */
int dg_adapt_disc(struct dg_adapt_ctx *c, const json_t *obj, const char *disc, const char *what,
		  const char **s, size_t *len);

/* A duration in seconds (a JSON number) as milliseconds, rounded, 0..max_ms. */
int dg_adapt_seconds(struct dg_adapt_ctx *c, const char *where, const json_t *v, int max_ms,
		     int *ms);

/* Stores the parsed action *act (taken: *act is zeroed, or freed on
 * error) that came from wire object w (a reference is taken), named name
 * on the wire, as a's next action, with its canonical object and text. The
 * caller has checked a->n < DG_ADAPT_ACTIONS_MAX. 0 or -ENOMEM. */
int dg_adapt_store(struct dg_adapt_ctx *c, struct dg_adapted *a, struct dg_action *act,
		   const json_t *w, const char *name);

/* ---- the APIs (adapt-anthropic.c, adapt-openai.c) ------------------------------ */

/* An Anthropic computer tool input (in) into its canonical action; name
 * (DG_ADAPT_NAME_MAX bytes) gets the wire action's name. */
int dg_adapt_anthropic_input(struct dg_adapt_ctx *c, const json_t *in, struct dg_action *out,
			     char *name);

/* An Anthropic tool_use block into a (id first, so a refusal can be answered). */
int dg_adapt_anthropic_block(struct dg_adapt_ctx *c, const json_t *obj, struct dg_adapted *a);

/* An OpenAI computer_call item into a (call_id and safety checks first). */
int dg_adapt_openai_call(struct dg_adapt_ctx *c, const json_t *obj, struct dg_adapted *a);

/* One chord of modifier keys held during an action (the computer tool's
 * `text` on clicks, the browser toolset's `modifiers`): "shift",
 * "ctrl+shift", "cmd+alt", as dg_keys_parse names keys; each key must be a
 * modifier. where names the field in messages. */
int dg_adapt_mods(struct dg_adapt_ctx *c, const char *where, const json_t *v, unsigned *mods);

/* key with `repeat` (the toolsets'): the chords of s (len bytes) pressed
 * `repeat` (rv) times, as one canonical key action of the chords written
 * out (1..DG_ACTION_CHORDS_MAX chords in all), into *out. */
int dg_adapt_key_repeat(struct dg_adapt_ctx *c, const char *s, size_t len, const json_t *rv,
			struct dg_action *out);

/* A browser toolset member (adapt-browser.c): the block's name nv and its
 * input in, into a (complete, or pending: see dg_adapt_resolve_wants). */
int dg_adapt_browser_member(struct dg_adapt_ctx *c, const json_t *nv, const json_t *in,
			    struct dg_adapted *a);

/* ---- the browser members' inputs (adapt-browser.c), for their MCP schemas ----
 *
 * What dg_adapt_browser_member accepts, member by member, so that the
 * schemas adapt-mcp.c publishes are made from the same table and cannot
 * drift from it. */

/* The fields of the members' inputs: bits B(BF_*). */
enum dg_bfield {
	BF_URL, BF_TAB, BF_DEPTH, BF_FILTER, BF_REF, BF_QUERY, BF_TARGET, BF_VALUE, BF_PATHS,
	BF_DOCS, BF_REGION, BF_MODS, BF_FROM, BF_DIR, BF_AMOUNT, BF_TEXT, BF_REPEAT, BF_DURATION,
	BF_N
};

/* The kinds of target object a target (or from) field takes. */
#define DG_BTARGET_COORD 1u /* {"type": "coordinate", "x", "y"} */
#define DG_BTARGET_REF 2u   /* {"type": "ref", "ref"} */

struct dg_bmember {
	const char *name;     /* "navigate", ... */
	unsigned accepted;    /* B(BF_*): the fields deskgate takes (the SDK's, less
				 those always refused: file_upload's document_ids) */
	unsigned required;    /* ... and requires (the SDK's, and file_upload's paths) */
	unsigned target, from; /* DG_BTARGET_* bits of its target and from (0: none) */
};

/* Member i (0..DG_BROWSER_MEMBERS-1, the SDK's order) into *out: 0 or
 * -ENOENT. */
int dg_adapt_browser_input(int i, struct dg_bmember *out);

/* The input field name of BF_* f ("url", "tab_id", ...), or NULL. */
const char *dg_adapt_bfield_name(int f);

/* The name of computer toolset member i (0..DG_COMPUTER_MEMBERS-1, the
 * SDK's order: the computer tool's actions), or NULL. */
const char *dg_adapt_computer_member_name(int i);

/* Whether the computer toolset member named v is disabled by the session's
 * tools list (adapt-browser.c). */
bool dg_adapt_computer_off(const struct dg_adapt_ctx *c, const json_t *v);

/* The answer to a browser toolset member (adapt-answer.c). */
json_t *dg_adapt_browser_answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o);

/* A refusal in the answers' words (adapt-answer.c): "deskgate refused
 * <action>: <reason> (rule <rule>, verdict <verdict>)", each part there
 * when given (the verdict when not "deny"), each text cleaned and cut as
 * dg_adapt_outcome's notes are. malloc'd, or NULL when out of memory. */
char *dg_adapt_refusal_text(const char *action, const char *verdict, const char *rule,
			    const char *reason);

/* prefix (trusted), then s cleaned and cut as a note; malloc'd, or NULL
 * when out of memory. */
char *dg_adapt_note_text(const char *prefix, const char *s);

/* The agent's hello (adapt-hello.c): its "events" into a->events. */
int dg_adapt_hello(struct dg_adapt_ctx *c, const json_t *obj, struct dg_adapted *a);

#endif
