/* keysym: key names of each API to X keysyms, and key chords.
 *
 * The X names come from a table generated at build time from x11proto-dev's
 * keysymdef.h and XF86keysym.h (keysym-table.cmake), so they are exactly
 * the names Xvnc and xdotool know. The policy later decides on keysyms, not
 * on names, so every spelling of a key ("ctrl", "Control_L", "CONTROL")
 * meets the same rule.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "actions/actions.h"
#include "actions/actions-priv.h"

#include "keysym-table.h"

/* Keysyms this file names directly. */
enum {
	KS_BACKSPACE = 0xff08,
	KS_TAB = 0xff09,
	KS_RETURN = 0xff0d,
	KS_ESCAPE = 0xff1b,
	KS_HOME = 0xff50,
	KS_LEFT = 0xff51,
	KS_UP = 0xff52,
	KS_RIGHT = 0xff53,
	KS_DOWN = 0xff54,
	KS_PAGE_UP = 0xff55,
	KS_PAGE_DOWN = 0xff56,
	KS_END = 0xff57,
	KS_INSERT = 0xff63,
	KS_KP_HOME = 0xff95,
	KS_KP_LEFT = 0xff96,
	KS_KP_UP = 0xff97,
	KS_KP_RIGHT = 0xff98,
	KS_KP_DOWN = 0xff99,
	KS_KP_PRIOR = 0xff9a,
	KS_KP_NEXT = 0xff9b,
	KS_KP_END = 0xff9c,
	KS_KP_BEGIN = 0xff9d,
	KS_KP_INSERT = 0xff9e,
	KS_KP_DELETE = 0xff9f,
	KS_KP_DECIMAL = 0xffae,
	KS_KP_0 = 0xffb0,
	KS_KP_1 = 0xffb1,
	KS_KP_2 = 0xffb2,
	KS_KP_3 = 0xffb3,
	KS_KP_4 = 0xffb4,
	KS_KP_5 = 0xffb5,
	KS_KP_6 = 0xffb6,
	KS_KP_7 = 0xffb7,
	KS_KP_8 = 0xffb8,
	KS_KP_9 = 0xffb9,
	KS_F1 = 0xffbe,
	KS_ISO_LOCK = 0xfe01,
	KS_ISO_LEVEL5_LOCK = 0xfe13,
	KS_ISO_LEFT_TAB = 0xfe20,
	KS_SHIFT_L = 0xffe1,
	KS_SHIFT_R = 0xffe2,
	KS_CONTROL_L = 0xffe3,
	KS_CAPS_LOCK = 0xffe5,
	KS_META_L = 0xffe7,
	KS_ALT_L = 0xffe9,
	KS_SUPER_L = 0xffeb,
	KS_HYPER_R = 0xffee,
	KS_DELETE = 0xffff,
	KS_SPACE = 0x20,
};

/* Every name that can be written back must fit a DG_KEYSYM_NAME_BUF buffer,
 * and the canonical form of the largest chord list must fit the keys limit,
 * or a canonical encoding would not parse back. */
_Static_assert(DG_ACTION_CHORDS_MAX * DG_CHORD_MAX * DG_KEYSYM_NAME_BUF <= DG_ACTION_KEYS_MAX,
	       "canonical keys must fit DG_ACTION_KEYS_MAX");

struct alias {
	const char *name;
	uint32_t keysym;
};

/* xdotool's aliases (its symbol_map) plus enter and esc. Matched
 * case-insensitively. */
static const struct alias xdotool_aliases[] = {
	{"ctrl", KS_CONTROL_L}, {"control", KS_CONTROL_L}, {"shift", KS_SHIFT_L},
	{"alt", KS_ALT_L},      {"super", KS_SUPER_L},     {"win", KS_SUPER_L},
	{"cmd", KS_SUPER_L},    {"meta", KS_META_L},       {"enter", KS_RETURN},
	{"esc", KS_ESCAPE},
};

/* OpenAI computer use's names, matched case-insensitively; F1..F24 are
 * handled apart. */
static const struct alias openai_names[] = {
	{"ctrl", KS_CONTROL_L},   {"control", KS_CONTROL_L}, {"shift", KS_SHIFT_L},
	{"alt", KS_ALT_L},        {"option", KS_ALT_L},      {"meta", KS_SUPER_L},
	{"cmd", KS_SUPER_L},      {"super", KS_SUPER_L},     {"win", KS_SUPER_L},
	{"enter", KS_RETURN},     {"return", KS_RETURN},     {"esc", KS_ESCAPE},
	{"escape", KS_ESCAPE},    {"tab", KS_TAB},           {"space", KS_SPACE},
	{"backspace", KS_BACKSPACE}, {"delete", KS_DELETE},  {"insert", KS_INSERT},
	{"home", KS_HOME},        {"end", KS_END},           {"pageup", KS_PAGE_UP},
	{"pagedown", KS_PAGE_DOWN}, {"arrowup", KS_UP},      {"arrowdown", KS_DOWN},
	{"arrowleft", KS_LEFT},   {"arrowright", KS_RIGHT},  {"up", KS_UP},
	{"down", KS_DOWN},        {"left", KS_LEFT},         {"right", KS_RIGHT},
	{"capslock", KS_CAPS_LOCK},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static int find_alias(const struct alias *t, size_t n, const char *name, uint32_t *keysym)
{
	for (size_t i = 0; i < n; i++) {
		if (strcasecmp(t[i].name, name) == 0) {
			*keysym = t[i].keysym;
			return 0;
		}
	}
	return -ENOENT;
}

static int cmp_entry(const void *key, const void *elem)
{
	return strcmp(key, ((const struct dg_keysym_entry *)elem)->name);
}

static int exact_name(const char *name, uint32_t *keysym)
{
	const struct dg_keysym_entry *e = bsearch(name, dg_keysym_table, DG_KEYSYM_TABLE_LEN,
						  sizeof(dg_keysym_table[0]), cmp_entry);
	if (!e)
		return -ENOENT;
	*keysym = e->value;
	return 0;
}

/* The code point when name is exactly one UTF-8 character. */
static int single_char(const char *name, uint32_t *cp)
{
	size_t len = strlen(name);
	const char *why;
	if (len == 0 || len > 4)
		return -ENOENT;
	if (dg_utf8_decode((const unsigned char *)name, len, cp, &why) != len)
		return -ENOENT;
	return 0;
}

/* "U" and 4 to 6 hex digits, as XKeysymToString writes Unicode keysyms. */
static int unicode_name(const char *name, uint32_t *cp)
{
	size_t len = strlen(name);
	if (name[0] != 'U' || len < 5 || len > 7)
		return -ENOENT;
	uint32_t v = 0;
	for (size_t i = 1; i < len; i++) {
		char c = name[i];
		int d = c >= '0' && c <= '9' ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -ENOENT;
		v = v * 16 + (uint32_t)d;
	}
	*cp = v;
	return 0;
}

/* The keysym of a character given as a key name. Unlike in text, a control
 * character is no key name, not even '\n' or '\t' (those keys are Return
 * and Tab), as in XStringToKeysym. */
static int char_keysym(uint32_t cp, uint32_t *keysym)
{
	if (cp < 0x20)
		return -ENOENT;
	return dg_keysym_from_codepoint(cp, keysym) == 0 ? 0 : -ENOENT;
}

/* A case-insensitive match, accepted only when every matching name denotes
 * the same keysym, so "return" is Return but "ETh" (ETH or eth) is no key. */
static int caseless_name(const char *name, uint32_t *keysym)
{
	bool found = false;
	uint32_t v = 0;
	for (size_t i = 0; i < DG_KEYSYM_TABLE_LEN; i++) {
		if (strcasecmp(dg_keysym_table[i].name, name) != 0)
			continue;
		if (found && dg_keysym_table[i].value != v)
			return -ENOENT;
		found = true;
		v = dg_keysym_table[i].value;
	}
	if (!found)
		return -ENOENT;
	*keysym = v;
	return 0;
}

int dg_keysym_from_name(const char *name, uint32_t *keysym)
{
	uint32_t cp;
	if (!name || !name[0] || strlen(name) > DG_KEY_NAME_MAX)
		return -ENOENT;
	if (exact_name(name, keysym) == 0)
		return 0;
	if (find_alias(xdotool_aliases, N_OF(xdotool_aliases), name, keysym) == 0)
		return 0;
	if (single_char(name, &cp) == 0 || unicode_name(name, &cp) == 0)
		return char_keysym(cp, keysym);
	return caseless_name(name, keysym);
}

int dg_keysym_from_openai(const char *name, uint32_t *keysym)
{
	uint32_t cp;
	if (!name || !name[0] || strlen(name) > DG_KEY_NAME_MAX)
		return -ENOENT;
	if (find_alias(openai_names, N_OF(openai_names), name, keysym) == 0)
		return 0;
	/* F1..F24, no leading zero. */
	if ((name[0] == 'F' || name[0] == 'f') && name[1] >= '1' && name[1] <= '9') {
		int f = name[1] - '0';
		if (name[2] >= '0' && name[2] <= '9' && !name[3])
			f = f * 10 + (name[2] - '0');
		else if (name[2])
			f = 0;
		if (f >= 1 && f <= 24) {
			*keysym = KS_F1 + (uint32_t)(f - 1);
			return 0;
		}
	}
	if (single_char(name, &cp) == 0) {
		if (cp >= 'A' && cp <= 'Z')
			cp += 'a' - 'A';
		return char_keysym(cp, keysym);
	}
	return dg_keysym_from_name(name, keysym);
}

int dg_keysym_name(uint32_t keysym, char *buf, size_t len)
{
	const struct dg_keysym_entry *best = NULL;
	for (size_t i = 0; i < DG_KEYSYM_TABLE_LEN; i++) {
		const struct dg_keysym_entry *e = &dg_keysym_table[i];
		if (e->value == keysym && (!best || e->order < best->order))
			best = e;
	}
	int n;
	if (best) {
		n = snprintf(buf, len, "%s", best->name);
	} else {
		/* Only Unicode keysyms that dg_keysym_from_codepoint produces have
		 * a "U" name; anything else would not parse back to itself. */
		uint32_t cp = keysym - 0x01000000u, back;
		if (keysym < 0x01000100u || keysym > 0x0110ffffu ||
		    dg_keysym_from_codepoint(cp, &back) != 0 || back != keysym)
			return -ENOENT;
		n = snprintf(buf, len, "U%04X", (unsigned)cp);
	}
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}

/* ---- the US layout's Shift level ------------------------------------------ */

/* The keys of Xvnc's default keymap (XKB "pc105" with layout "us") that
 * give another keysym with Shift: each key's level 1 and level 2, from
 * xkb-data's symbols/us ("basic"), symbols/pc (Tab) and symbols/keypad
 * ("x11": the keypad with Num Lock off, its digits at the Shift level, so
 * KP_1 is typed with Shift, not by Xvnc turning Num Lock on and leaving
 * it). The letters a..z and A..Z are the rest of that table and are
 * computed. Checked against those files by tests/unit/test_actions_keysym.c. */
static const struct {
	uint32_t base, shifted;
} us_shift_levels[] = {
	{'`', '~'}, {'1', '!'}, {'2', '@'},  {'3', '#'}, {'4', '$'}, {'5', '%'},
	{'6', '^'}, {'7', '&'}, {'8', '*'},  {'9', '('}, {'0', ')'}, {'-', '_'},
	{'=', '+'}, {'[', '{'}, {']', '}'},  {';', ':'}, {'\'', '"'}, {',', '<'},
	{'.', '>'}, {'/', '?'}, {'\\', '|'},
	{KS_TAB, KS_ISO_LEFT_TAB},
	{KS_KP_HOME, KS_KP_7},  {KS_KP_UP, KS_KP_8},    {KS_KP_PRIOR, KS_KP_9},
	{KS_KP_LEFT, KS_KP_4},  {KS_KP_BEGIN, KS_KP_5}, {KS_KP_RIGHT, KS_KP_6},
	{KS_KP_END, KS_KP_1},   {KS_KP_DOWN, KS_KP_2},  {KS_KP_NEXT, KS_KP_3},
	{KS_KP_INSERT, KS_KP_0}, {KS_KP_DELETE, KS_KP_DECIMAL},
};

int dg_keysym_us_shifted(uint32_t keysym, uint32_t *shifted)
{
	if (keysym >= 'a' && keysym <= 'z') {
		*shifted = keysym - 'a' + 'A';
		return 0;
	}
	for (size_t i = 0; i < N_OF(us_shift_levels); i++) {
		if (us_shift_levels[i].base == keysym) {
			*shifted = us_shift_levels[i].shifted;
			return 0;
		}
	}
	return -ENOENT;
}

int dg_keysym_us_unshifted(uint32_t keysym, uint32_t *base)
{
	if (keysym >= 'A' && keysym <= 'Z') {
		*base = keysym - 'A' + 'a';
		return 0;
	}
	for (size_t i = 0; i < N_OF(us_shift_levels); i++) {
		if (us_shift_levels[i].shifted == keysym) {
			*base = us_shift_levels[i].base;
			return 0;
		}
	}
	return -ENOENT;
}

bool dg_keysym_is_shift(uint32_t keysym)
{
	return keysym == KS_SHIFT_L || keysym == KS_SHIFT_R;
}

bool dg_keysym_in_us_keymap(uint32_t keysym)
{
	return (keysym >= 0x20 && keysym <= 0x7e) || (keysym & 0xffffff00u) == 0xff00;
}

uint32_t dg_keysym_codepoint(uint32_t keysym)
{
	if (keysym >= 0xa0 && keysym <= 0xff)
		return keysym;
	if (keysym >= 0x01000100u && keysym <= 0x0110ffffu)
		return keysym - 0x01000000u;
	return 0;
}

bool dg_keysym_is_modifier(uint32_t keysym)
{
	/* Shift_L .. Hyper_R (keysymdef.h), ISO_Level3_Shift and its kin. */
	return (keysym >= KS_SHIFT_L && keysym <= KS_HYPER_R) ||
	       (keysym >= KS_ISO_LOCK && keysym <= KS_ISO_LEVEL5_LOCK);
}

/* ---- chords ---------------------------------------------------------------- */

/* Resolves one chord, keys[0..len), into c. whole is the complete keys
 * string, quoted in messages. */
static int parse_chord(const char *part, size_t len, const char *whole, struct dg_chord *c,
		       struct dg_err *err)
{
	char shown[DG_SHOW_BUF], name_shown[DG_SHOW_BUF];
	dg_show(whole, strlen(whole), shown, sizeof(shown));
	c->n = 0;
	for (size_t i = 0; i <= len;) {
		size_t j = i;
		while (j < len && part[j] != '+')
			j++;
		if (j == i)
			return dg_err_set(err, -EINVAL, "empty key name in \"%s\" (write '+' as plus)",
					  shown);
		dg_show(part + i, j - i, name_shown, sizeof(name_shown));
		if (j - i > DG_KEY_NAME_MAX)
			return dg_err_set(err, -EINVAL, "key name \"%s\" in \"%s\" is over %d bytes",
					  name_shown, shown, DG_KEY_NAME_MAX);
		if (c->n == DG_CHORD_MAX)
			return dg_err_set(err, -EINVAL, "more than %d keys in one chord in \"%s\"",
					  DG_CHORD_MAX, shown);
		char name[DG_KEY_NAME_MAX + 1];
		memcpy(name, part + i, j - i);
		name[j - i] = '\0';
		uint32_t ks;
		if (dg_keysym_from_name(name, &ks) != 0)
			return dg_err_set(err, -EINVAL, "unknown key \"%s\" in \"%s\"", name_shown,
					  shown);
		for (int k = 0; k < c->n; k++)
			if (c->keysyms[k] == ks)
				return dg_err_set(err, -EINVAL,
						  "key \"%s\" appears twice in one chord in \"%s\"",
						  name_shown, shown);
		c->keysyms[c->n++] = ks;
		if (j == len)
			break;
		i = j + 1;
		if (i == len)
			return dg_err_set(err, -EINVAL, "empty key name in \"%s\" (write '+' as plus)",
					  shown);
	}
	return 0;
}

int dg_keys_parse(const char *keys, struct dg_chord *chords, int max, int *n, struct dg_err *err)
{
	char shown[DG_SHOW_BUF];
	*n = 0;
	if (!keys)
		return dg_err_set(err, -EINVAL, "no keys");
	size_t len = strnlen(keys, DG_ACTION_KEYS_MAX + 1);
	if (len > DG_ACTION_KEYS_MAX)
		return dg_err_set(err, -EINVAL, "more than %d bytes", DG_ACTION_KEYS_MAX);
	dg_show(keys, len, shown, sizeof(shown));
	for (size_t i = 0; i < len; i++) {
		unsigned char b = (unsigned char)keys[i];
		if (b < 0x20 || b == 0x7f)
			return dg_err_set(err, -EINVAL,
					  "control character \\x%02x in \"%s\" (chords are separated "
					  "by spaces)",
					  b, shown);
	}
	int count = 0;
	for (size_t i = 0; i < len;) {
		if (keys[i] == ' ') {
			i++;
			continue;
		}
		size_t j = i;
		while (j < len && keys[j] != ' ')
			j++;
		if (count == max)
			return dg_err_set(err, -EINVAL, "more than %d chords in \"%s\"", max, shown);
		int rc = parse_chord(keys + i, j - i, keys, &chords[count], err);
		if (rc < 0)
			return rc;
		count++;
		i = j;
	}
	if (count == 0)
		return dg_err_set(err, -EINVAL, "no keys in \"%s\"", shown);
	*n = count;
	return 0;
}

int dg_keys_format(const struct dg_chord *chords, int n, char *buf, size_t len)
{
	size_t o = 0;
	if (len == 0)
		return -ENOSPC;
	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < chords[i].n; k++) {
			char name[DG_KEYSYM_NAME_BUF];
			int rc = dg_keysym_name(chords[i].keysyms[k], name, sizeof(name));
			if (rc < 0)
				return rc;
			const char *sep = k > 0 ? "+" : i > 0 ? " " : "";
			int w = snprintf(buf + o, len - o, "%s%s", sep, name);
			if (w < 0 || (size_t)w >= len - o)
				return -ENOSPC;
			o += (size_t)w;
		}
	}
	return 0;
}
