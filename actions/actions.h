/* actions: the canonical action schema, key names and text as X keysyms.
 *
 * Everything here is pure: no I/O, no global mutable state, safe to call
 * from any thread. Every input is hostile (an agent's output is shaped by
 * pages an attacker controls), so parsing is strict and bounded, and every
 * refusal is an error message naming the field, e.g.
 *   action.x: 1280 is off the screen (width 1280)
 *   action.keys: unknown key "Retrun" in "ctrl+Retrun"
 *   action: unknown field "butto" for click (allowed: x, y, button, count, modifiers)
 *   action.type: unknown action "clik"
 * Untrusted bytes quoted in a message are escaped (control bytes and
 * non-ASCII as \xNN, quotes and backslashes with a backslash) and cut after
 * 64 bytes, so a message can neither forge a log line nor grow unbounded.
 *
 * Error convention (as in base/base.h): 0 or a negative errno; the
 * message goes to the caller's struct dg_err.
 *
 * ---- The schema: one JSON object per action --------------------------------
 *
 * "type" names the action; the other fields depend on it. Unknown fields,
 * duplicated fields, wrong JSON types, missing required fields and values
 * out of range are refused. Integers must be JSON integers (1.0, 1e2 and
 * "1" are refused). Coordinates are pixels of the desktop: 0 <= x < width,
 * 0 <= y < height, where the caller passes the desktop's size.
 *
 *   click        x, y; button = "left"; count = 1 (1..3: single, double,
 *                triple click); modifiers = []
 *   move         x, y; modifiers = []
 *   drag         path: [[x, y], ...] (2..DG_ACTION_PATH_MAX points; the
 *                button goes down at the first, up at the last);
 *                button = "left"; modifiers = []
 *   mouse_down   button = "left"; x, y optional, both or neither: when
 *   mouse_up     given, the pointer moves there first; when not, the
 *                button acts where the pointer is (a policy that checks
 *                regions must then use the tracked pointer position)
 *   scroll       x, y; dx = 0, dy = 0 (wheel notches, |d| <=
 *                DG_ACTION_SCROLL_MAX; positive dy scrolls down, positive
 *                dx right; at least one is not 0); modifiers = []
 *   type         text (1..DG_ACTION_TEXT_MAX bytes of UTF-8, typed as
 *                keysyms, see dg_text_to_keysyms; line breaks are kept as
 *                "\n": "\r\n" and "\r" become "\n", which types the same)
 *   key          keys (chords, see dg_keys_parse)
 *   hold_key     keys (exactly one chord), ms (0..DG_ACTION_HOLD_MS_MAX):
 *                pressed, held for ms, released
 *   navigate     url (1..DG_ACTION_URL_MAX bytes, no control characters;
 *                which URLs are allowed is the policy's business)
 *   back, forward, reload, screenshot, cursor_position   (no fields)
 *   zoom         region: [x1, y1, x2, y2], the rectangle x1 <= x < x2,
 *                y1 <= y < y2: 0 <= x1 < x2 <= width, 0 <= y1 < y2 <= height
 *   wait         ms (0..DG_ACTION_WAIT_MS_MAX)
 *   exec         argv (1..DG_ACTION_ARGV_MAX strings of at most
 *                DG_ACTION_ARG_MAX bytes, argv[0] not empty, no NUL);
 *                stdin = "" (at most DG_ACTION_STDIN_MAX bytes, may hold
 *                NUL); timeout_ms optional (1..DG_ACTION_TIMEOUT_MS_MAX;
 *                absent: the policy's exec limit applies; the policy's
 *                limit also caps a given value)
 *   read_page    depth = DG_ACTION_DEPTH_DEFAULT (1..DG_ACTION_DEPTH_MAX);
 *                filter = "visible" ("interactive", "all"); ref optional
 *                ("ref_N", 1 <= N <= DG_ACTION_REF_MAX: the subtree of an
 *                element a read_page of this document named): the page's
 *                accessibility tree as text, browser sessions only
 *   get_page_text   (no fields) the page's readable text, browser only
 *   find         query (1..DG_ACTION_QUERY_MAX bytes, no control
 *                characters): the page's elements that match it, ranked,
 *                with references, browser only
 *   list_tabs, new_tab, read_console, read_network   (no fields) browser
 *                only: the open tabs; a new blank tab brought to the
 *                front; what the page logged, and requested, since the
 *                last read
 *   switch_tab   tab (1..DG_ACTION_TAB_MAX bytes of [0-9A-Za-z._-]): that
 *   close_tab    tab brought to the front; that tab closed
 *   scroll_to    ref; x, y optional (both or neither): the element
 *                scrolled into view
 *   form_input   ref; value (a string of at most DG_ACTION_VALUE_MAX
 *                bytes, no NUL; a number; or true/false); x, y optional:
 *                the form element set to value as a user would
 *   file_upload  ref; paths (1..DG_ACTION_PATHS_MAX absolute paths of at
 *                most DG_ACTION_FILE_PATH_MAX bytes, each component
 *                neither empty, "." nor "..", no control characters);
 *                x, y optional: the file input given those files
 *   javascript   code (1..DG_ACTION_CODE_MAX bytes of UTF-8, no NUL): run
 *                in the page, its last expression's value answered
 * click and move also take ref (an element reference, as read_page gives
 * it) with x, y optional: an action with a ref and without x, y is
 * UNRESOLVED (dg_action_unresolved): whoever runs it first finds the
 * element's point on the screen (scrolling it into view) and fills x, y
 * in, and only a resolved action is decided or performed. A resolved
 * action keeps its ref beside x, y, for the record.
 * screenshot takes an optional region [x1, y1, x2, y2] (as zoom's): that
 * rectangle at its own size, unscaled (a browser's viewport).
 *
 * button is one of "left", "middle", "right", "back", "forward".
 * modifiers is an array of distinct names among "ctrl", "shift", "alt",
 * "super", "meta" (held during the action; pressed in that order).
 *
 * No string may contain NUL (\u0000) except exec's stdin, and text, url and
 * argv must be valid UTF-8 (jansson guarantees it for JSON strings).
 *
 * ---- The canonical encoding ---------------------------------------------
 *
 * dg_action_canonical(), i.e. dg_action_to_json() dumped with
 * JSON_COMPACT | JSON_SORT_KEYS, is THE canonical encoding of an action:
 * every default is filled in (button "left", count 1, modifiers [], dx/dy 0,
 * stdin ""), modifiers in the fixed order above, keys written with their
 * preferred X keysym names ("ctrl+l" becomes "Control_L+l", "return"
 * becomes "Return"). Two inputs that mean the same action encode to the same
 * bytes, and parsing the encoding gives it back unchanged, so hashes of it
 * are stable: approvals and recordings are bound to them. The only optional
 * fields without a default, mouse_down/mouse_up x, y and exec timeout_ms,
 * appear exactly when given, because their absence means something.
 */
#ifndef DG_ACTIONS_H
#define DG_ACTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/base.h"

/* ---- limits (each accepted at its value, refused one past it) ---------- */

#define DG_ACTION_JSON_MAX (64 * 1024)     /* bytes of one action's JSON text */
#define DG_ACTION_SCREEN_MAX 16384         /* largest screen width or height */
#define DG_ACTION_COUNT_MAX 3              /* click count */
#define DG_ACTION_PATH_MAX 1024            /* points of a drag path (at least 2) */
#define DG_ACTION_SCROLL_MAX 100           /* |dx|, |dy| in wheel notches */
#define DG_ACTION_TEXT_MAX 16384           /* bytes of type.text */
#define DG_ACTION_KEYS_MAX 8192            /* bytes of a keys string: room for the
                                              canonical form of the largest chords */
#define DG_ACTION_CHORDS_MAX 32            /* chords in a keys string */
#define DG_CHORD_MAX 8                     /* keys in one chord */
#define DG_KEY_NAME_MAX 64                 /* bytes of one key name */
#define DG_ACTION_HOLD_MS_MAX 60000        /* hold_key.ms */
#define DG_ACTION_WAIT_MS_MAX 60000        /* wait.ms */
#define DG_ACTION_URL_MAX 8192             /* bytes of navigate.url */
#define DG_ACTION_ARGV_MAX 256             /* strings in exec.argv (at least 1) */
#define DG_ACTION_ARG_MAX 4096             /* bytes of one exec.argv string */
#define DG_ACTION_STDIN_MAX 32768          /* bytes of exec.stdin */
#define DG_ACTION_TIMEOUT_MS_MAX (7 * 24 * 3600 * 1000) /* exec.timeout_ms, as limits */
#define DG_ACTION_DEPTH_DEFAULT 15         /* read_page.depth when not given */
#define DG_ACTION_DEPTH_MAX 100            /* read_page.depth */
#define DG_ACTION_REF_MAX 999999999        /* the N of "ref_N" */
#define DG_ACTION_REF_DIGITS 9             /* ... its digits at most */
#define DG_ACTION_QUERY_MAX 1024           /* bytes of find.query */
#define DG_ACTION_TAB_MAX 64               /* bytes of a tab id */
#define DG_ACTION_VALUE_MAX 16384          /* bytes of form_input's string value */
#define DG_ACTION_PATHS_MAX 16             /* files of one file_upload */
#define DG_ACTION_FILE_PATH_MAX 1024       /* bytes of one file_upload path */
#define DG_ACTION_CODE_MAX 32768           /* bytes of javascript.code */

/* ---- types -------------------------------------------------------------- */

enum dg_action_type {
	DG_ACTION_CLICK,
	DG_ACTION_MOVE,
	DG_ACTION_DRAG,
	DG_ACTION_MOUSE_DOWN,
	DG_ACTION_MOUSE_UP,
	DG_ACTION_SCROLL,
	DG_ACTION_TYPE,
	DG_ACTION_KEY,
	DG_ACTION_HOLD_KEY,
	DG_ACTION_NAVIGATE,
	DG_ACTION_BACK,
	DG_ACTION_FORWARD,
	DG_ACTION_RELOAD,
	DG_ACTION_SCREENSHOT,
	DG_ACTION_ZOOM,
	DG_ACTION_CURSOR_POSITION,
	DG_ACTION_WAIT,
	DG_ACTION_EXEC,
	DG_ACTION_READ_PAGE,
	DG_ACTION_GET_PAGE_TEXT,
	DG_ACTION_FIND,
	DG_ACTION_LIST_TABS,
	DG_ACTION_NEW_TAB,
	DG_ACTION_SWITCH_TAB,
	DG_ACTION_CLOSE_TAB,
	DG_ACTION_READ_CONSOLE,
	DG_ACTION_READ_NETWORK,
	DG_ACTION_SCROLL_TO,
	DG_ACTION_FORM_INPUT,
	DG_ACTION_FILE_UPLOAD,
	DG_ACTION_JAVASCRIPT,
	DG_ACTION_N_TYPES
};

/* X pointer button numbers, as RFB and XTest count them (the RFB button
 * mask bit is 1 << (button - 1)). */
enum dg_button {
	DG_BUTTON_LEFT = 1,
	DG_BUTTON_MIDDLE = 2,
	DG_BUTTON_RIGHT = 3,
	DG_BUTTON_BACK = 8,
	DG_BUTTON_FORWARD = 9,
};

/* form_input's value: what the element is set to. */
enum dg_value_kind { DG_VALUE_NONE, DG_VALUE_STRING, DG_VALUE_NUMBER, DG_VALUE_BOOL };

/* read_page's filter: what is in view (the default), only interactive
 * elements in view, or everything rendered, in view or not. */
enum dg_read_filter { DG_READ_VISIBLE, DG_READ_INTERACTIVE, DG_READ_ALL };

/* Modifier bits of dg_action.modifiers, in their canonical (and pressing)
 * order. */
enum dg_modifier {
	DG_MOD_CTRL = 1u << 0,  /* Control_L */
	DG_MOD_SHIFT = 1u << 1, /* Shift_L */
	DG_MOD_ALT = 1u << 2,   /* Alt_L */
	DG_MOD_SUPER = 1u << 3, /* Super_L */
	DG_MOD_META = 1u << 4,  /* Meta_L */
};
#define DG_MOD_COUNT 5

/* One chord: keys pressed in order keysyms[0..n-1], then released in reverse
 * order. As written ("ctrl+shift+Tab": Control_L, Shift_L, Tab), so the
 * modifiers normally come first and the key last; the keysyms of a chord are
 * distinct. */
struct dg_chord {
	uint32_t keysyms[DG_CHORD_MAX];
	int n;
};

/* A parsed action. Fields not used by the type are 0/NULL. Owns its
 * pointers: release with dg_action_free. */
struct dg_action {
	enum dg_action_type type;
	int x, y;               /* click, move, scroll; mouse_down/up when has_xy */
	bool has_xy;            /* mouse_down/up: x, y were given */
	enum dg_button button;  /* click, drag, mouse_down, mouse_up */
	int count;              /* click: 1..DG_ACTION_COUNT_MAX */
	unsigned modifiers;     /* click, move, drag, scroll: DG_MOD_* bits */
	int (*path)[2];         /* drag: n_path points (x, y) */
	int n_path;
	int dx, dy;             /* scroll */
	char *text;             /* type: NUL-terminated valid UTF-8, text_len bytes */
	size_t text_len;
	struct dg_chord chords[DG_ACTION_CHORDS_MAX]; /* key, hold_key (1 chord) */
	int n_chords;
	int ms;                 /* hold_key, wait */
	char *url;              /* navigate: NUL-terminated */
	int region[4];          /* zoom: x1, y1, x2, y2 */
	char **argv;            /* exec: argc strings, then NULL */
	int argc;
	char *stdin_data;       /* exec: stdin_len bytes (may hold NUL), NUL-terminated */
	size_t stdin_len;
	int timeout_ms;         /* exec: 0 when not given */
	int depth;              /* read_page */
	enum dg_read_filter filter; /* read_page */
	int ref;                /* read_page, and the element of click, move,
				   scroll_to, form_input, file_upload: the N of
				   ref_N; 0 when not given */
	char *query;            /* find: NUL-terminated valid UTF-8 */
	char *tab;              /* switch_tab, close_tab: the tab's id */
	enum dg_value_kind value_kind; /* form_input: which of text, number, flag */
	double number;          /* form_input: a number value */
	bool flag;              /* form_input: a boolean value */
	char **paths;           /* file_upload: n_paths absolute paths */
	int n_paths;
	char *code;             /* javascript: NUL-terminated valid UTF-8 */
	size_t code_len;
	bool has_region;        /* screenshot: region given (zoom always has one) */
};

/* Parses one action from JSON text of len bytes (not NUL-terminated
 * necessarily) for a screen of screen_w x screen_h pixels. Text longer
 * than DG_ACTION_JSON_MAX is refused before any parsing (-E2BIG). Decoding
 * rejects duplicate keys. Returns 0, -EINVAL (bad action, or a screen size
 * outside 1..DG_ACTION_SCREEN_MAX), -E2BIG or -ENOMEM. On error *a is
 * zeroed (dg_action_free on it is harmless). */
int dg_action_parse(const char *json, size_t len, int screen_w, int screen_h,
		    struct dg_action *a, struct dg_err *err);

/* The same for an already decoded object (for the Anthropic and OpenAI
 * adapters, which translate into canonical objects). The caller must have
 * decoded with JSON_REJECT_DUPLICATES if duplicates matter to it. */
int dg_action_parse_obj(const json_t *obj, int screen_w, int screen_h, struct dg_action *a,
			struct dg_err *err);

/* The canonical JSON object of a (see "The canonical encoding"); a new
 * reference, or NULL when out of memory. a must come from dg_action_parse*. */
json_t *dg_action_to_json(const struct dg_action *a);

/* The canonical encoding: dg_action_to_json dumped with JSON_COMPACT |
 * JSON_SORT_KEYS. malloc'd, NUL-terminated (*len, when not NULL, gets its
 * length), or NULL when out of memory. */
char *dg_action_canonical(const struct dg_action *a, size_t *len);

/* Whether a is an action on an element (ref given) whose point on the
 * screen is not known yet: click, move, scroll_to, form_input and
 * file_upload with a ref and without x, y. */
bool dg_action_unresolved(const struct dg_action *a);

/* Whether the action type acts on a browser's page and means nothing to
 * another desktop (navigate, back, ..., read_page, the tab actions,
 * form_input, javascript, ...). */
bool dg_action_type_browser_only(enum dg_action_type t);

/* Frees what a owns and zeroes it. Safe on a zeroed or already freed action. */
void dg_action_free(struct dg_action *a);

/* "click", "move", ...; NULL for a value outside the enum. */
const char *dg_action_type_name(enum dg_action_type t);

/* The type named name, or -1. */
int dg_action_type_from_name(const char *name);

/* "left", ...; NULL for a value outside the enum. */
const char *dg_button_name(enum dg_button b);

/* Parses an element reference "ref_N" (len bytes, no leading zero, 1 <= N
 * <= DG_ACTION_REF_MAX) into *ref. Returns 0, -EINVAL (not ref_N) or
 * -ERANGE (N too large). */
int dg_ref_parse(const char *s, size_t len, int *ref);

/* Fills out with the keysyms of the modifier bits in mods, in canonical
 * order; returns how many. */
int dg_modifier_keysyms(unsigned mods, uint32_t out[DG_MOD_COUNT]);

/* ---- key names ------------------------------------------------------------
 *
 * dg_keysym_from_name resolves, in this order, the first rule that matches:
 *  1. an exact X keysym name of keysymdef.h or XF86keysym.h ("Return",
 *     "BackSpace", "a", "A", "F5", "KP_Enter", "Page_Down", "XF86AudioMute"),
 *     case-sensitive, from a table generated at build time from those
 *     headers, so the names are exactly those of XStringToKeysym;
 *  2. an xdotool-style alias, case-insensitive: ctrl, control -> Control_L;
 *     shift -> Shift_L; alt -> Alt_L; super, win, cmd -> Super_L;
 *     meta -> Meta_L; and, because models send them although xdotool does
 *     not know them, enter -> Return, esc -> Escape;
 *  3. a single Unicode character ("a", "1", "/", "ä", "😀") by the rule of
 *     dg_keysym_from_codepoint, control characters refused (even '\n' and
 *     '\t': those keys are named Return and Tab);
 *  4. "U" and 4 to 6 hex digits ("U20AC"), the Unicode keysym names of
 *     XStringToKeysym and XKeysymToString, by the same rule;
 *  5. a case-insensitive match of an X keysym name, when all the names that
 *     match denote the same keysym ("return", "backspace", "PAGE_DOWN",
 *     "escape"); when they do not ("ETh": ETH or eth), the name is unknown.
 * Raw numbers ("0xff0d") are not key names. Returns 0 or -ENOENT. */
int dg_keysym_from_name(const char *name, uint32_t *keysym);

/* The key names of OpenAI computer use (issue #4): matched
 * case-insensitively, as OpenAI's reference implementation lowercases every
 * key: CTRL, CONTROL -> Control_L; SHIFT -> Shift_L; ALT, OPTION -> Alt_L;
 * META, CMD, SUPER, WIN -> Super_L (OpenAI's META is the browser's Meta key,
 * i.e. the Super key on X; xdotool's meta alias means Meta_L instead);
 * ENTER, RETURN; ESC, ESCAPE; TAB; SPACE; BACKSPACE; DELETE; INSERT; HOME;
 * END; PAGEUP; PAGEDOWN; ARROWUP, ARROWDOWN, ARROWLEFT, ARROWRIGHT and
 * UP, DOWN, LEFT, RIGHT; F1..F24; CAPSLOCK. A single character maps as in
 * dg_keysym_from_codepoint, except that an ASCII letter maps to its
 * lowercase keysym ("C" in ["CTRL", "C"] means the C key, not Shift+c).
 * Any other name falls back to dg_keysym_from_name. Returns 0 or -ENOENT. */
int dg_keysym_from_openai(const char *name, uint32_t *keysym);

/* Writes the preferred name of keysym into buf (the first name the headers
 * list for it; "U%04X" for a Unicode keysym without one), so that
 * dg_keysym_from_name(buf) gives keysym back. Returns 0, -ENOENT (no name:
 * not a keysym deskgate produces) or -ENOSPC (buf too small; 32 bytes
 * always suffice). */
#define DG_KEYSYM_NAME_BUF 32
int dg_keysym_name(uint32_t keysym, char *buf, size_t len);

/* Parses xdotool-style key chords: chords separated by one or more spaces
 * ("ctrl+a BackSpace"), keys of a chord joined by '+' ("ctrl+shift+Tab"),
 * each key a name for dg_keysym_from_name (so '+' itself is "plus" and a
 * space "space"). At most DG_ACTION_KEYS_MAX bytes, max chords (at most
 * DG_ACTION_CHORDS_MAX), DG_CHORD_MAX keys per chord, DG_KEY_NAME_MAX bytes
 * per name; no empty chord part ("ctrl++", "+a"), no key twice in one
 * chord, no control character, at least one chord. Messages do not name the
 * field (the caller prefixes it): `unknown key "Retrun" in "ctrl+Retrun"`.
 * Returns 0 or -EINVAL. */
int dg_keys_parse(const char *keys, struct dg_chord *chords, int max, int *n,
		  struct dg_err *err);

/* Writes chords in canonical form ("Control_L+l BackSpace") into buf.
 * Returns 0, -ENOENT (a keysym without a name) or -ENOSPC. */
int dg_keys_format(const struct dg_chord *chords, int n, char *buf, size_t len);

/* ---- the US layout's Shift level ---------------------------------------------
 *
 * Xvnc's keymap is the US layout, and a key event names a keysym, not a
 * key: a keysym that its key gives at the other Shift level than the one
 * held makes Xvnc fake its way there (it presses Caps Lock and leaves it
 * on, or releases Shift), so "shift+a" sent as Shift_L, a arrives as "a".
 * The desktop's input therefore sends what xdotool's key press yields on
 * that layout: with Shift held, the key's Shift keysym (a -> A, 1 -> !,
 * slash -> question, Tab -> ISO_Left_Tab); a keysym of the Shift level
 * without Shift held, with Shift pressed around it.
 *
 * dg_keysym_us_shifted: the keysym the key of keysym gives with Shift, for
 * the keys whose Shift level differs (a..z, the digits and the US
 * punctuation keys, Tab, the keypad with Num Lock off: KP_End -> KP_1);
 * dg_keysym_us_unshifted: for a keysym at such a key's Shift level (A..Z,
 * !, ?, ISO_Left_Tab, KP_1, ...), the key's level-1 keysym. Both return 0 or -ENOENT (any other keysym: its key has no other
 * Shift level, or it is no key of the layout). */
int dg_keysym_us_shifted(uint32_t keysym, uint32_t *shifted);
int dg_keysym_us_unshifted(uint32_t keysym, uint32_t *base);

/* Shift_L or Shift_R. */
bool dg_keysym_is_shift(uint32_t keysym);

/* A keysym a US keymap has a key for: printable ASCII and the function,
 * cursor, keypad and modifier keys (0xff00..0xffff). Any other (é, 漢,
 * 😀) Xvnc must map onto a spare keycode when it is pressed. */
bool dg_keysym_in_us_keymap(uint32_t keysym);

/* The code point a keysym outside the US keymap types (Latin-1 keysyms
 * have the code point's value, Unicode keysyms are 0x01000000 + it), or 0
 * for any other keysym. The inverse of dg_keysym_from_codepoint there. */
uint32_t dg_keysym_codepoint(uint32_t keysym);

/* A modifier keysym (Shift_L..Hyper_R, ISO_Lock..ISO_Level5_Lock): held
 * while the chord's other keys are pressed. */
bool dg_keysym_is_modifier(uint32_t keysym);

/* ---- text ------------------------------------------------------------------ */

/* The keysym that types Unicode code point cp: '\n' and '\r' -> Return
 * (0xff0d), '\t' -> Tab (0xff09); U+0020..U+007E and U+00A0..U+00FF -> the
 * same value (the Latin-1 keysyms); any other code point -> 0x01000000 + cp
 * (the X convention for Unicode keysyms; Xvnc maps keysyms it has no key
 * for onto spare keycodes). Other control characters (U+0000..U+001F,
 * U+007F..U+009F; '\b' included: erasing is a key action, not text),
 * surrogates and values above U+10FFFF are refused. Returns 0 or -EINVAL. */
int dg_keysym_from_codepoint(uint32_t cp, uint32_t *keysym);

/* Converts UTF-8 text of len bytes into the keysyms that type it, one per
 * code point (a "\r\n" pair gives one Return). out may be NULL to validate
 * and count only; otherwise at most max are written. *n gets the count.
 * Refused (-EINVAL, the message gives the byte offset and the reason):
 * invalid UTF-8 (stray continuation bytes, truncated sequences, overlong
 * encodings, surrogates, values above U+10FFFF), NUL and the control
 * characters of dg_keysym_from_codepoint. -ENOBUFS when out holds fewer
 * than needed. */
int dg_text_to_keysyms(const char *utf8, size_t len, uint32_t *out, size_t max, size_t *n,
		       struct dg_err *err);

/* ==== adapters: the Anthropic computer tool and OpenAI computer use =========
 *
 * The session WebSocket accepts three ways to speak (issue #4). These
 * functions translate one agent message into canonical actions and build the
 * answer the agent appends to its conversation. Pure, like the rest of this
 * header: no I/O; the caller runs the actions, asks the policy and takes the
 * screenshots.
 *
 * ---- Which format a message is (the wire-detection rule) ------------------
 *
 * One JSON text message holds one JSON object (anything else is refused).
 *  1. It has "type":
 *       "tool_use"        an Anthropic tool_use content block, exactly as the
 *                         Messages API returns it: type, id, name, input
 *                         (name must be "computer"; id 1..DG_ADAPT_ID_MAX
 *                         printable ASCII bytes, no spaces), and what the
 *                         SDK's types add: caller ({type, tool_id?}),
 *                         cache_control ({type: "ephemeral", ttl?}),
 *                         toolset_name (null or "computer"; another toolset
 *                         is refused). With toolset_name "computer" the
 *                         block may also be a member of the computer
 *                         toolset: name is the action ("left_click") and
 *                         input has no "action";
 *       "computer_call"   an OpenAI computer_call output item, exactly as the
 *                         Responses API returns it: type, id, call_id, one of
 *                         action (preview) or actions (batched),
 *                         pending_safety_checks, status;
 *       a canonical action name ("click", ..., "exec"): a canonical action
 *                         (at most DG_ACTION_JSON_MAX bytes, as on its own);
 *       anything else is refused, naming the type.
 *  2. It has no "type" but has "action": the input object of an Anthropic
 *     tool_use block on its own ({"action":"left_click","coordinate":[..]}).
 *  3. Otherwise it is refused.
 * A bare OpenAI action object ({"type":"click","button":"left",...}) is not
 * an OpenAI message: by rule 1 it reads as a canonical action, in desktop
 * coordinates (and "wheel" is no canonical button), so OpenAI speakers send
 * the whole computer_call item.
 *
 * ---- What is accepted --------------------------------------------------------
 *
 * Strict as the canonical schema: unknown or misplaced fields, wrong JSON
 * types, missing required fields and values out of range are refused with
 * the field named: "anthropic.input.coordinate[0]: 1100 is off the display
 * (width 1024)", "openai.actions[2].keys[0]: unknown key \"CTLR\"". The
 * Anthropic input is "anthropic.input" whether it came alone or inside a
 * block. One relaxation: an optional field whose value is null counts as
 * absent (SDKs dump unset fields as null; the reference tools treat None as
 * not given). Coordinates are JSON numbers in MODEL space (see scaling);
 * like every integer field (scroll_amount, OpenAI scroll_x), a non-integer
 * is rounded to the nearest integer, halves away from zero (the SDKs type
 * them as `number`): the canonical action holds what is done, the wire
 * action (a->wire_actions, a->raw: what the recording keeps) what was
 * received.
 *
 * Anthropic actions (the union of computer_20241022, computer_20250124 and
 * computer_20251124: a message does not say which version the tool was
 * declared with, and no action means different things in different
 * versions). Key names are xdotool's, parsed by dg_keys_parse. "mods" is
 * the optional `text` of click, drag and scroll actions (20250124): one
 * chord of modifier keys held during the action ("shift", "ctrl+shift";
 * any name dg_keys_parse resolves to a Control, Shift, Alt, Super or Meta
 * keysym).
 *   key              text (chords), repeat? (1..DG_ACTION_CHORDS_MAX times,
 *                    the computer toolset's)          -> key (the chords
 *                    written out repeat times, at most DG_ACTION_CHORDS_MAX)
 *   type             text                             -> type
 *   mouse_move       coordinate                       -> move
 *   left_click       coordinate?, mods                -> click (left)
 *   right_click      coordinate?, mods                -> click (right)
 *   middle_click     coordinate?, mods                -> click (middle)
 *   double_click     coordinate?, mods                -> click (count 2)
 *   triple_click     coordinate?, mods                -> click (count 3)
 *   left_click_drag  coordinate, start_coordinate?, mods
 *                                                     -> drag [start, coordinate]
 *   left_mouse_down  coordinate?                      -> mouse_down (left)
 *   left_mouse_up    coordinate?                      -> mouse_up (left)
 *   scroll           coordinate?, scroll_direction (up, down, left, right),
 *                    scroll_amount (1..DG_ACTION_SCROLL_MAX wheel notches),
 *                    mods                             -> scroll (dy < 0 is up)
 *   hold_key         text (one chord), duration (seconds, integer or not,
 *                    0..DG_ACTION_HOLD_MS_MAX/1000)   -> hold_key (ms rounded)
 *   wait             duration (seconds, 0..DG_ACTION_WAIT_MS_MAX/1000)
 *                                                     -> wait (ms rounded)
 *   screenshot                                        -> screenshot
 *   cursor_position                                   -> cursor_position
 *   zoom             region [x1, y1, x2, y2]          -> zoom
 * Where a coordinate is optional (the pointer acts where it is; 20241022
 * drags start there), the caller's cursor (the current pointer position,
 * desktop space) is used, so every translated pointer action carries
 * explicit coordinates for the policy's region rules.
 *
 * OpenAI actions (preview: one `action`; batched: `actions`, 1 to
 * DG_ADAPT_ACTIONS_MAX of them). Key names go through dg_keysym_from_openai;
 * one element may also be a '+'-joined combination ("CTRL+C"), as models
 * sometimes write. "keys" on pointer actions: modifier keys held during it.
 *   click         x, y, button (left, right, wheel, back, forward), keys?
 *                                                     -> click ("wheel": middle)
 *   double_click  x, y, keys?                          -> click (count 2)
 *   scroll        x, y, scroll_x, scroll_y (pixels), keys?
 *                                                     -> scroll (notches, below)
 *   type          text                                -> type
 *   keypress      keys (1..DG_CHORD_MAX names, one chord: all pressed
 *                 together)                           -> key
 *   wait          (no fields)                         -> wait DG_ADAPT_OPENAI_WAIT_MS
 *   screenshot                                        -> screenshot
 *   move          x, y, keys?                          -> move
 *   drag          path [{x, y}, ...] (2..DG_ACTION_PATH_MAX), keys?
 *                                                     -> drag
 * Scroll pixels are model pixels: scaled to desktop pixels on their axis,
 * then divided by DG_ADAPT_PIXELS_PER_NOTCH and rounded to the nearest
 * notch, at least one notch when not 0; more than DG_ACTION_SCROLL_MAX
 * notches is refused; both 0 is refused.
 * pending_safety_checks (at most DG_ADAPT_SAFETY_MAX objects {id, code?,
 * message?}) are kept and passed through as acknowledged_safety_checks: by
 * forwarding a call to deskgate the agent acknowledges them, and deskgate's
 * policy (allow, deny, ask a human) is where such calls are judged.
 *
 * ---- Scaling --------------------------------------------------------------
 *
 * The model may see a display of another size than the desktop (screenshots
 * are scaled to it by the caller). A model coordinate must lie on the model
 * display (0 <= x < model_w, 0 <= y < model_h; a zoom region's x2, y2 may
 * equal the size); it maps to round(x * desk_w / model_w) (halves up),
 * clamped to desk_w - 1 (an edge to desk_w; a region keeps at least one
 * pixel). Answers map the cursor back the same way. Canonical actions are in
 * desktop coordinates and are not mapped.
 */

#define DG_ADAPT_JSON_MAX (256 * 1024)     /* bytes of one message (a canonical
                                              action: DG_ACTION_JSON_MAX) */
#define DG_ADAPT_ACTIONS_MAX 64            /* actions of an OpenAI batch */
#define DG_ADAPT_ID_MAX 256                /* bytes of a tool_use id, call_id, item
                                              id or safety check id */
#define DG_ADAPT_SAFETY_MAX 16             /* pending safety checks of one call */
#define DG_ADAPT_SAFETY_TEXT_MAX 4096      /* bytes of a safety check's code or message */
#define DG_ADAPT_PIXELS_PER_NOTCH 100      /* OpenAI scroll pixels per wheel notch
                                              (Chromium scrolls ~100 px a notch) */
#define DG_ADAPT_OPENAI_WAIT_MS 1000       /* OpenAI wait {} (OpenAI's sample
                                              harness sleeps one second) */
#define DG_ADAPT_PNG_MAX (32 * 1024 * 1024) /* bytes of a PNG put into an answer */
#define DG_ADAPT_NOTE_MAX 2048             /* bytes of each text put into an answer
                                              (error, reason, rule, ...); longer is cut */
#define DG_ADAPT_REAL_MAX 1e9              /* magnitude of a non-integer number
                                              (coordinate, amount) rounded to an
                                              integer; beyond it, refused */
#define DG_ADAPT_NAME_MAX 24               /* room for a wire action name */
#define DG_ADAPT_BODY_MAX (1024 * 1024)    /* bytes of a browser member's answer text */
#define DG_ADAPT_BROWSER_WAIT_MS 30000     /* browser wait and hold_key durations */
#define DG_ADAPT_BROWSER_SCROLL_MAX 10     /* browser scroll_amount (notches) */
#define DG_ADAPT_BROWSER_SCROLL_DEFAULT 3

enum dg_wire {
	DG_WIRE_UNKNOWN,   /* not told (the message could not be read) */
	DG_WIRE_CANONICAL,
	DG_WIRE_ANTHROPIC,
	DG_WIRE_OPENAI,
	DG_WIRE_HELLO,     /* the agent's hello: no action, the events it wants */
};

/* What an agent may ask for in its hello, {"type": "hello", "events":
 * [...]}: the messages its socket gets besides the answers (bits of
 * dg_adapted.events). Without a hello it gets none: after an action, the
 * next text message on the agent's socket is that action's answer. */
enum dg_agent_event {
	DG_AGENT_EVENT_PAGE = 1u << 0,     /* "page": the page changed (URL, title, tab) */
	DG_AGENT_EVENT_GUARD = 1u << 1,    /* "guard": a download or file chooser refused */
	DG_AGENT_EVENT_DECISION = 1u << 2, /* "decision": the browser's and the proxy's
					      decisions on requests the page made */
};
#define DG_AGENT_EVENT_KINDS 3
#define DG_AGENT_EVENTS_MAX 8 /* entries of a hello's "events" list */

/* The name of one event bit ("page", ...), or NULL when it is not one. */
const char *dg_agent_event_name(unsigned bit);
/* The bit of an event name, or 0 when name (may be NULL) names none. */
unsigned dg_agent_event_bit(const char *name);

/* ---- Anthropic's toolsets ---------------------------------------------------
 *
 * The tool definitions the agent gave the model (the Messages API's
 * `tools` entries, BetaToolUnion), told to deskgate at the session's
 * creation, decide which toolset members the model could have been
 * served: a member whose config says "enabled": false is refused as a
 * call the model was never offered. Parsed by dg_toolsets_parse:
 *   {"type": "browser_toolset_20260801", "configs"?: {MEMBER: {"enabled"?:
 *     B, "defer_loading"?: B} | null, ...} | null, "cache_control"?: ...}
 *   {"type": "computer_toolset_20260801", "configs"?: ..., "cache_control"?}
 * Unknown members in configs and unknown fields are refused, as the SDK
 * types say ("Unknown keys are rejected"); every member is enabled by
 * default; entries of any other type (the agent's own tools, the computer
 * tool versions) are skipped unread but for their "type". */
#define DG_TOOLSETS_ENTRIES_MAX 128 /* entries of a tools list */
#define DG_BROWSER_MEMBERS 31       /* browser_toolset_20260801's members */
#define DG_COMPUTER_MEMBERS 17      /* computer_toolset_20260801's */

struct dg_toolsets {
	bool browser, computer;          /* declared */
	uint32_t browser_off;            /* disabled members: bit i = browser member i
					    (dg_browser_member_name) */
	uint32_t computer_off;           /* bit i = computer member i */
};

/* Parses a tools list (a JSON array) into t. 0 or -EINVAL (err names the
 * entry and field: "tools[0].configs.javascript_exec.enabled: ..."). */
int dg_toolsets_parse(const json_t *tools, struct dg_toolsets *t, struct dg_err *err);

/* The name of browser member i (0..DG_BROWSER_MEMBERS-1), or NULL. */
const char *dg_browser_member_name(int i);

/* The desktop's size and the size of the display the model was told about
 * (model_w = model_h = 0 means the same as the desktop), and the toolsets
 * it was given (NULL: none declared, every member enabled). */
struct dg_adapt_scale {
	int desk_w, desk_h;
	int model_w, model_h;
	const struct dg_toolsets *toolsets;
};

/* ---- Resolving: actions on a page's elements and viewport ------------------
 *
 * A browser toolset member acts at viewport coordinates or at an element
 * (ref), and a canonical click or move may name an element: before such an
 * action is decided, the runner asks the browser where the viewport is on
 * the screen and where the element is (scrolling it into view), then
 * dg_adapt_resolve makes the canonical action in screen coordinates. The
 * request: */
struct dg_resolve_req {
	char tab[DG_ACTION_TAB_MAX + 1]; /* the tab to bring to the front first, or "" */
	int ref;                         /* the element, or 0 (the viewport alone) */
	bool scroll;                     /* bring the element into view */
	bool hit;                        /* its point must reach it (not an overlay) */
};
/* What the browser answered (parsed by the runner from the worker's
 * answer): the viewport's rectangle on the screen, and the element's
 * point (screen pixels) when a ref was asked for. */
struct dg_browser_view {
	int vp_x, vp_y, vp_w, vp_h;
	bool has_point;
	int px, py;
};

/* One parsed message. Owns its references: release with dg_adapted_free. */
struct dg_adapted {
	enum dg_wire wire;
	/* The id to answer to: the tool_use id (has_id false when only the input
	 * was sent) or the OpenAI call_id; NUL-terminated. */
	bool has_id;
	char call_id[DG_ADAPT_ID_MAX + 1];
	json_t *raw;                            /* the decoded message, for recordings */
	/* actions[i]: canonical action i (dg_action_to_json form, desktop
	 * coordinates, accepted by dg_action_parse_obj for the desktop's size);
	 * wire_actions[i]: the agent's own action object it came from (for recordings
	 * and messages); name[i]: that action's wire name ("left_click",
	 * "click", ...). One wire action gives exactly one canonical action. */
	json_t *actions[DG_ADAPT_ACTIONS_MAX];
	json_t *wire_actions[DG_ADAPT_ACTIONS_MAX];
	/* act[i]: canonical action i as parsed (validated for the desktop's
	 * size: what a policy decides on, with no parse of its own); text[i]:
	 * its canonical encoding (dg_action_canonical, text_len[i] bytes,
	 * NUL-terminated): what goes to the worker and what an approval binds. */
	struct dg_action act[DG_ADAPT_ACTIONS_MAX];
	char *text[DG_ADAPT_ACTIONS_MAX];
	size_t text_len[DG_ADAPT_ACTIONS_MAX];
	char name[DG_ADAPT_ACTIONS_MAX][DG_ADAPT_NAME_MAX];
	int n;
	bool batched;                           /* OpenAI "actions" rather than "action" */
	bool toolset;                           /* Anthropic: toolset_name "computer"
						   (the answer names it too) */
	bool browser;                           /* Anthropic: toolset_name "browser" */
	/* A browser member or canonical action waiting for the page's
	 * geometry (dg_adapt_resolve_wants): pending means act[0],
	 * actions[0] and text[0] do not exist yet (n is 1: one action). */
	bool pending;
	struct {
		struct dg_resolve_req req;
		json_t *tmpl;       /* the canonical object without its screen coordinates */
		int kind;           /* what to fill in (adapt-browser.c) */
		int v[4];           /* viewport coordinates: a point, a drag's two, a region */
	} bcall;
	json_t *safety_checks;                  /* OpenAI: validated copy of
						   pending_safety_checks (an array,
						   maybe empty); NULL otherwise */
	struct dg_adapt_scale scale;            /* as given, model size filled in */
	unsigned events;                        /* DG_WIRE_HELLO: dg_agent_event bits */
};

/* Parses one message of len bytes (see "Which format a message is") for the
 * given scale; cursor_x, cursor_y is the pointer's current position in
 * desktop coordinates (used where an Anthropic action acts at the pointer).
 * Returns 0, -EINVAL, -E2BIG (over DG_ADAPT_JSON_MAX, or over
 * DG_ACTION_JSON_MAX for a canonical action, or a batch over
 * DG_ADAPT_ACTIONS_MAX) or -ENOMEM. On error a->n is 0 and every action is
 * released, but what was read before the error stays so the caller can
 * answer in the agent's format: wire (when detected), call_id/has_id (when
 * valid) and, for OpenAI, the safety checks (when valid). A scale or cursor
 * outside the desktop is -EINVAL (a caller bug). a need not be initialised;
 * release it with dg_adapted_free whatever the result. */
int dg_adapt_parse(const char *msg, size_t len, const struct dg_adapt_scale *scale,
		   int cursor_x, int cursor_y, struct dg_adapted *a, struct dg_err *err);

/* Releases what a holds and zeroes it. Safe on a zeroed or freed struct. */
void dg_adapted_free(struct dg_adapted *a);

/* Whether action i of a needs the page's geometry before it can be decided
 * (a pending browser member, or an unresolved canonical action); if so
 * *req says what to ask. */
bool dg_adapt_resolve_wants(const struct dg_adapted *a, int i, struct dg_resolve_req *req);

/* Makes action i of a whole from what the browser answered: a pending
 * member's canonical action in screen coordinates (a viewport point off
 * the viewport is refused naming the field: "browser.input.target.x: 1400
 * is outside the viewport (width 1280)"), or an unresolved action's x, y
 * set to the element's point. Returns 0, -EINVAL (err says why) or
 * -ENOMEM. */
int dg_adapt_resolve(struct dg_adapted *a, int i, const struct dg_browser_view *v,
		     struct dg_err *err);

/* "canonical", "anthropic", "openai", "hello", "unknown". */
const char *dg_wire_name(enum dg_wire w);

/* What happened to a parsed message, for its answer. Strings may be NULL;
 * they need not be trusted (a reason may quote a page's URL): each is cut
 * to DG_ADAPT_NOTE_MAX bytes, invalid UTF-8 becomes U+FFFD and control
 * characters spaces before it reaches the model. */
struct dg_adapt_outcome {
	bool ok;                /* every action of the message ran */
	int done;               /* actions that ran: a->n when ok; otherwise the
				   index of the action refused or failed (the
				   batch stopped there; 0 when parsing failed) */
	/* A refusal (when verdict, rule or reason is given): the policy's
	 * verdict ("deny", "ask", ...), rule and reason. */
	const char *verdict, *rule, *reason;
	const char *error;      /* otherwise, why it failed (e.g. the parse error) */
	const char *text;       /* extra text for the model, or NULL */
	const uint8_t *png;     /* the screenshot after, already at the model's size */
	size_t png_len;         /* at most DG_ADAPT_PNG_MAX */
	const char *url;        /* current URL (browser sessions), or NULL */
	/* Browser toolset answers: body is the member's answer text (a page's
	 * tree, its text, ...: at most DG_ADAPT_BODY_MAX bytes, longer is cut
	 * with a note), tabs the worker's tab list after the call ([{"id",
	 * "url", "title", "active"}]) and tabs_before the ids open before it
	 * (an array of strings), for browser_state. */
	const char *body;
	const json_t *tabs;
	const json_t *tabs_before;
	bool has_cursor;        /* cursor_position's answer: */
	int cursor_x, cursor_y; /*   the pointer, desktop coordinates */
};

/* Builds the answer to a in its wire format (a new reference in *out):
 *
 * Anthropic: the tool_result block to append to the conversation,
 *   {"type":"tool_result","tool_use_id":ID,"content":[...],"is_error":B}
 *   content: a text block when there is something to say (in this order:
 *   the refusal "deskgate refused <action>: <reason> (rule <rule>)", the
 *   failure "deskgate failed <action>: <error>", or for a message that did
 *   not parse "deskgate rejected the call: <error>"; cursor_position's
 *   "X=<x>,Y=<y>" in model coordinates; o->text), then the image block
 *   {"type":"image","source":{"type":"base64","media_type":"image/png",
 *   "data":...}} when a PNG is given. When nothing else would be said and no
 *   PNG is given, one text block "deskgate ran <action>". is_error is !ok.
 *   When only the input was sent (no id), the same block WITHOUT
 *   "tool_use_id": the agent holds the id and adds it. A block of the
 *   computer toolset (toolset_name "computer") is answered with
 *   "toolset_name":"computer" too.
 *
 * OpenAI: a JSON ARRAY of the items to append to the next request's input:
 *   first {"type":"computer_call_output","call_id":ID,
 *   "acknowledged_safety_checks":[...],"output":{"type":"computer_screenshot",
 *   "image_url":"data:image/png;base64,..."}}, exactly the openai SDK's
 *   ResponseInputItem.ComputerCallOutput (neither the item nor its output
 *   has a URL field); then, when there is something to say,
 *   {"type":"message","role":"user","content":[{"type":"input_text",
 *   "text":"..."}]}: the refusal or failure (the call was refused, failed or
 *   did not parse), o->text, and "current_url: URL" when a URL is given
 *   that is 1..DG_ACTION_URL_MAX bytes of UTF-8 without control characters
 *   (a mangled URL would mislead the model), one per line in that order. An
 *   array because computer_call_output has no error or URL field: without
 *   the message the model would only see the screen. For a batch the text
 *   says which action ("action 3 of 5 (click)") and that the rest did not
 *   run. The PNG is required (the output has no other form).
 *
 * Canonical messages are answered by the gateway in its own format: -EINVAL.
 * Returns 0, -EINVAL (inconsistent outcome: done out of range, ok with done
 * != n, cursor off the desktop, cursor_position ok without the cursor, no
 * PNG for OpenAI, no call_id for OpenAI), -E2BIG (PNG over
 * DG_ADAPT_PNG_MAX) or -ENOMEM. */
int dg_adapt_answer(const struct dg_adapted *a, const struct dg_adapt_outcome *o, json_t **out,
		    struct dg_err *err);

/* ==== MCP tools (docs/mcp.md) ================================================
 *
 * The MCP front door re-wraps a tool call as ONE agent message that
 * dg_adapt_parse reads like any other, so there is no path around the
 * adapters and the policy; and turns the answer the gateway built for it
 * back into a CallToolResult. Pure: no I/O.
 *
 * Tools (MCP 2025-11-25 Tool objects: name, title, description,
 * inputSchema {"type": "object", "properties", "required"?,
 * "additionalProperties": false}, annotations):
 *   computer   the Anthropic computer tool (computer_20251124): its tool_use
 *              input ({"action", "coordinate"?, "text"?, ...}), coordinates
 *              in the display the gateway shows the model
 *   exec       {"argv", "stdin"?, "timeout_ms"?}: the canonical exec action
 *   browser_*  (browser sessions) the 31 browser toolset members as 28 tools,
 *              named as playwright-mcp names them where they overlap; their
 *              schemas made from adapt-browser.c's member table, the SDK's
 *              BetaBrowser*Input types as deskgate accepts them;
 *              browser_tabs is {"action": "list" | "new" | "select" |
 *              "close", "tab_id"?}: list_tabs, new_tab, switch_tab,
 *              close_tab.
 */

/* The tools array of a tools/list result: computer and exec, and the
 * browser tools when browser; the computer tool's description names the
 * display_w x display_h display (1..DG_ACTION_SCREEN_MAX each). A new
 * reference, or NULL (out of memory, or a display size out of range). */
json_t *dg_mcp_tools(bool browser, int display_w, int display_h);

/* A tools/call of tool with arguments args (an object; NULL means {}) as
 * one agent message text into *msg (malloc'd, NUL-terminated, *len bytes):
 *   computer   {"type":"tool_use","id":call_id,"name":"computer","input":args}
 *   browser_*  {"type":"tool_use","id":call_id,"name":MEMBER,"input":args,
 *              "toolset_name":"browser"} (browser_tabs: its action picks the
 *              member, its tab_id is the member's)
 *   exec       {"type":"exec","argv",...}: argv, stdin and timeout_ms only
 *              (null counts as absent), checked by the canonical parser
 * call_id: 1..DG_ADAPT_ID_MAX bytes of printable ASCII without spaces (the
 * caller makes it, "mcp_12"; exec's canonical message carries none).
 * Returns 0, -ENOENT (no tool named so: "no tool named ..."), -EINVAL
 * (args not an object, a bad call_id, exec's or browser_tabs' own fields:
 * "exec: unknown field ...", "browser_tabs.action: ...",
 * "browser_tabs.tab_id: ..."; the other fields are the adapter's to
 * judge) or -ENOMEM. On error *msg is NULL. */
int dg_mcp_call_message(const char *tool, const json_t *args, const char *call_id, char **msg,
			size_t *len, struct dg_err *err);

/* The gateway's answer to such a message as a CallToolResult
 * {"content": [...], "isError": B} (a new reference in *result):
 *   a tool_result block (exec false): text blocks as text, image blocks as
 *     {"type":"image","data","mimeType"}, a browser_state block as a last
 *     text "browser_state: <the block without its type, compact JSON>";
 *     isError is is_error;
 *   the canonical exec result (exec true): one text: a refusal (verdict
 *     not "allow") as the answers word it, "deskgate refused exec: <reason>
 *     (rule <rule>)"; a failure as its error; else the "exec" object
 *     (exit_code, stdout, stderr, ...) as compact JSON; isError is !ok;
 *   a gateway error {"type":"error","error":{"code","message"}} (either):
 *     one text "<code>: <message>", isError true.
 * Notes (reasons, rules, errors, codes, messages) are cleaned and cut as
 * dg_adapt_outcome's. Returns 0, -EINVAL (anything else, or a field of the
 * wrong type: err names it) or -ENOMEM. */
int dg_mcp_result(const json_t *answer, bool exec, json_t **result, struct dg_err *err);

#endif
