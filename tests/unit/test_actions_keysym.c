/* Key names, chords and text as keysyms: the generated table against the X
 * headers themselves, the aliases of xdotool and OpenAI, the Unicode rule,
 * strict UTF-8 and every chord refusal. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/actions.h"

#define X11_DIR "/usr/include/X11"

static uint32_t ks;
static struct dg_err err;

#define assert_key(name, want)                                                             \
	do {                                                                               \
		ks = 0;                                                                    \
		int rc_ = dg_keysym_from_name((name), &ks);                                \
		cr_assert_eq(rc_, 0, "%s: rc %d", (name), rc_);                            \
		cr_assert_eq(ks, (uint32_t)(want), "%s: 0x%x, want 0x%x", (name), ks,       \
			     (unsigned)(want));                                            \
	} while (0)

#define assert_no_key(name)                                                                \
	do {                                                                               \
		int rc_ = dg_keysym_from_name((name), &ks);                                \
		cr_assert_eq(rc_, -ENOENT, "%s: rc %d (0x%x)", (name), rc_, ks);           \
	} while (0)

#define assert_openai(name, want)                                                          \
	do {                                                                               \
		ks = 0;                                                                    \
		int rc_ = dg_keysym_from_openai((name), &ks);                              \
		cr_assert_eq(rc_, 0, "%s: rc %d", (name), rc_);                            \
		cr_assert_eq(ks, (uint32_t)(want), "%s: 0x%x, want 0x%x", (name), ks,       \
			     (unsigned)(want));                                            \
	} while (0)

/* ---- the generated table against the headers ------------------------------- */

struct hdr_entry {
	char name[64];
	uint32_t value;
};

/* Reads every "#define <prefix>NAME value" of a header, independently of the
 * generator, naming entries as XStringToKeysym does. */
static size_t read_header(const char *path, const char *prefix, const char *out_prefix,
			  struct hdr_entry *e, size_t n, size_t cap)
{
	FILE *f = fopen(path, "r");
	cr_assert(f, "cannot open %s", path);
	char line[512], macro[128], value[128];
	size_t plen = strlen(prefix);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "#define %127s %127s", macro, value) != 2)
			continue;
		if (strncmp(macro, prefix, plen) != 0)
			continue;
		cr_assert_lt(n, cap);
		unsigned long v;
		if (strncmp(value, "_EVDEVK(", 8) == 0)
			v = 0x10081000ul + strtoul(value + 8, NULL, 16);
		else
			v = strtoul(value, NULL, 16);
		cr_assert(strncmp(value, "0x", 2) == 0 || strncmp(value, "_EVDEVK(0x", 10) == 0,
			  "%s: unexpected value %s", macro, value);
		snprintf(e[n].name, sizeof(e[n].name), "%s%s", out_prefix, macro + plen);
		e[n].value = (uint32_t)v;
		n++;
	}
	fclose(f);
	return n;
}

Test(keysym, table_matches_headers)
{
	size_t cap = 8192;
	struct hdr_entry *e = calloc(cap, sizeof(*e));
	size_t n = read_header(X11_DIR "/keysymdef.h", "XK_", "", e, 0, cap);
	size_t n_core = n;
	n = read_header(X11_DIR "/XF86keysym.h", "XF86XK_", "XF86", e, n, cap);
	cr_assert_gt(n_core, 2000, "only %zu keysyms in keysymdef.h", n_core);
	cr_assert_gt(n - n_core, 200, "only %zu keysyms in XF86keysym.h", n - n_core);

	for (size_t i = 0; i < n; i++) {
		assert_key(e[i].name, e[i].value);
		/* The preferred name is the first one listed for the value. */
		size_t first = 0;
		while (e[first].value != e[i].value)
			first++;
		char name[DG_KEYSYM_NAME_BUF];
		cr_assert_eq(dg_keysym_name(e[i].value, name, sizeof(name)), 0, "%s", e[i].name);
		cr_assert_str_eq(name, e[first].name, "value 0x%x", e[i].value);
	}
	free(e);
}

Test(keysym, exact_names)
{
	assert_key("Return", 0xff0d);
	assert_key("BackSpace", 0xff08);
	assert_key("a", 0x61);
	assert_key("A", 0x41);
	assert_key("F5", 0xffc2);
	assert_key("KP_Enter", 0xff8d);
	assert_key("Page_Down", 0xff56);
	assert_key("Next", 0xff56);
	assert_key("space", 0x20);
	assert_key("Escape", 0xff1b);
	assert_key("Tab", 0xff09);
	assert_key("Super_L", 0xffeb);
	assert_key("XF86AudioMute", 0x1008ff12);
	assert_key("XF86BrightnessAuto", 0x100810f4); /* an _EVDEVK definition */
	assert_key("eth", 0xf0);
	assert_key("ETH", 0xd0);
}

Test(keysym, xdotool_aliases)
{
	assert_key("ctrl", 0xffe3);
	assert_key("CTRL", 0xffe3);
	assert_key("control", 0xffe3);
	assert_key("shift", 0xffe1);
	assert_key("alt", 0xffe9);
	assert_key("super", 0xffeb);
	assert_key("win", 0xffeb);
	assert_key("cmd", 0xffeb);
	assert_key("meta", 0xffe7);
	assert_key("enter", 0xff0d);
	assert_key("Enter", 0xff0d);
	assert_key("esc", 0xff1b);
}

Test(keysym, single_characters)
{
	assert_key("1", 0x31);
	assert_key("/", 0x2f);
	assert_key("+", 0x2b);
	assert_key("ä", 0xe4);
	assert_key("\xc2\xa0", 0xa0);      /* no-break space: Latin-1 */
	assert_key("€", 0x010020ac);       /* Unicode keysym, not legacy EuroSign */
	assert_key("漢", 0x01006f22);
	assert_key("😀", 0x0101f600);
	/* Control characters are no key names, even those text maps. */
	assert_no_key("\n");
	assert_no_key("\t");
	assert_no_key("\x1b");
	assert_no_key("\x7f");
	assert_no_key("\xc2\x85");         /* U+0085, a C1 control */
	assert_no_key("\xc3");             /* truncated UTF-8 */
	assert_no_key("\xc0\xaf");         /* overlong '/' */
	assert_no_key("\xed\xa0\x80");     /* surrogate */
	assert_no_key("ab\xc3\xa4");       /* more than one character, not a name */
}

Test(keysym, unicode_names)
{
	assert_key("U20AC", 0x010020ac);
	assert_key("U20ac", 0x010020ac);
	assert_key("U00E4", 0xe4);          /* Latin-1 keeps its value, as in libX11 */
	assert_key("U1F600", 0x0101f600);
	assert_key("U10FFFF", 0x0110ffff);
	assert_no_key("U110000");
	assert_no_key("UD800");
	assert_no_key("U0009");            /* a control character */
	assert_no_key("U009F");
	assert_no_key("U20A");             /* 3 digits */
	assert_no_key("U0010FFFF");        /* 8 digits */
	assert_no_key("U+20AC");
	assert_no_key("u20ac");
	assert_no_key("U20AG");
}

Test(keysym, caseless_when_unambiguous)
{
	assert_key("return", 0xff0d);
	assert_key("RETURN", 0xff0d);
	assert_key("backspace", 0xff08);
	assert_key("PAGE_DOWN", 0xff56);
	assert_key("escape", 0xff1b);
	assert_key("f5", 0xffc2);
	assert_key("xf86audiomute", 0x1008ff12);
	/* "ETh" matches ETH (0xd0) and eth (0xf0): no guess. */
	assert_no_key("ETh");
	assert_no_key("Ae");
}

Test(keysym, unknown_names)
{
	assert_no_key("Retrun");
	assert_no_key("");
	assert_no_key("0xff0d");
	assert_no_key("65293");
	assert_no_key("ctrl+l");
	assert_no_key(" a");
	cr_assert_eq(dg_keysym_from_name(NULL, &ks), -ENOENT);
	char longname[DG_KEY_NAME_MAX + 2];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_no_key(longname);
}

Test(keysym, openai_names)
{
	assert_openai("CTRL", 0xffe3);
	assert_openai("CONTROL", 0xffe3);
	assert_openai("ctrl", 0xffe3);
	assert_openai("SHIFT", 0xffe1);
	assert_openai("ALT", 0xffe9);
	assert_openai("OPTION", 0xffe9);
	assert_openai("META", 0xffeb); /* the browser's Meta key is X's Super */
	assert_openai("CMD", 0xffeb);
	assert_openai("SUPER", 0xffeb);
	assert_openai("WIN", 0xffeb);
	assert_openai("ENTER", 0xff0d);
	assert_openai("RETURN", 0xff0d);
	assert_openai("ESC", 0xff1b);
	assert_openai("ESCAPE", 0xff1b);
	assert_openai("TAB", 0xff09);
	assert_openai("SPACE", 0x20);
	assert_openai("BACKSPACE", 0xff08);
	assert_openai("DELETE", 0xffff);
	assert_openai("INSERT", 0xff63);
	assert_openai("HOME", 0xff50);
	assert_openai("END", 0xff57);
	assert_openai("PAGEUP", 0xff55);
	assert_openai("PAGEDOWN", 0xff56);
	assert_openai("ARROWUP", 0xff52);
	assert_openai("ARROWDOWN", 0xff54);
	assert_openai("ARROWLEFT", 0xff51);
	assert_openai("ARROWRIGHT", 0xff53);
	assert_openai("UP", 0xff52);
	assert_openai("DOWN", 0xff54);
	assert_openai("LEFT", 0xff51);
	assert_openai("RIGHT", 0xff53);
	assert_openai("CAPSLOCK", 0xffe5);
	assert_openai("F1", 0xffbe);
	assert_openai("F12", 0xffc9);
	assert_openai("F24", 0xffd5);
	assert_openai("f9", 0xffc6);
	/* Letters are keys, not characters: "C" in CTRL+C is the c key. */
	assert_openai("C", 0x63);
	assert_openai("c", 0x63);
	assert_openai("/", 0x2f);
	assert_openai("ä", 0xe4);
	/* Other names fall back to the X names. */
	assert_openai("Page_Down", 0xff56);
	assert_openai("KP_Enter", 0xff8d);
	cr_assert_eq(dg_keysym_from_openai("BOGUS", &ks), -ENOENT);
	cr_assert_eq(dg_keysym_from_openai("F0", &ks), -ENOENT);
	cr_assert_eq(dg_keysym_from_openai("F01", &ks), -ENOENT);
	cr_assert_eq(dg_keysym_from_openai("F1x", &ks), -ENOENT);
	cr_assert_eq(dg_keysym_from_openai("\t", &ks), -ENOENT);
	cr_assert_eq(dg_keysym_from_openai("", &ks), -ENOENT);
}

Test(keysym, names_written_back)
{
	char name[DG_KEYSYM_NAME_BUF];
	cr_assert_eq(dg_keysym_name(0xff0d, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "Return");
	cr_assert_eq(dg_keysym_name(0xff56, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "Next"); /* listed before Page_Down */
	cr_assert_eq(dg_keysym_name(0x010020ac, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "U20AC");
	cr_assert_eq(dg_keysym_name(0x0101f600, name, sizeof(name)), 0);
	cr_assert_str_eq(name, "U1F600");
	/* Not keysyms deskgate makes: a Unicode keysym for a Latin-1 or control
	 * character, a surrogate, garbage. */
	cr_assert_eq(dg_keysym_name(0x01000041, name, sizeof(name)), -ENOENT);
	cr_assert_eq(dg_keysym_name(0x01000009, name, sizeof(name)), -ENOENT);
	cr_assert_eq(dg_keysym_name(0x0100d800, name, sizeof(name)), -ENOENT);
	cr_assert_eq(dg_keysym_name(0x01110000, name, sizeof(name)), -ENOENT);
	cr_assert_eq(dg_keysym_name(0x12345678, name, sizeof(name)), -ENOENT);
	/* "Return" needs 7 bytes. */
	cr_assert_eq(dg_keysym_name(0xff0d, name, 6), -ENOSPC);
	cr_assert_eq(dg_keysym_name(0xff0d, name, 7), 0);
}

/* Every typeable character has a name that parses back to its keysym
 * (sampled above U+0300 to keep the test fast). */
Test(keysym, every_character_round_trips)
{
	char name[DG_KEYSYM_NAME_BUF];
	size_t checked = 0;
	for (uint32_t cp = 0x20; cp <= 0x10ffff; cp += cp < 0x300 ? 1 : 97) {
		uint32_t k, back;
		if (dg_keysym_from_codepoint(cp, &k) != 0)
			continue;
		cr_assert_eq(dg_keysym_name(k, name, sizeof(name)), 0, "U+%04X", cp);
		cr_assert_eq(dg_keysym_from_name(name, &back), 0, "U+%04X: %s", cp, name);
		cr_assert_eq(back, k, "U+%04X: %s gives 0x%x, want 0x%x", cp, name, back, k);
		checked++;
	}
	cr_assert_gt(checked, 10000);
}

/* ---- chords ------------------------------------------------------------------ */

static struct dg_chord chords[DG_ACTION_CHORDS_MAX];
static int n_chords;

static int keys(const char *s)
{
	memset(&err, 0, sizeof(err));
	memset(chords, 0, sizeof(chords));
	return dg_keys_parse(s, chords, DG_ACTION_CHORDS_MAX, &n_chords, &err);
}

#define assert_chord(i, ...)                                                               \
	do {                                                                               \
		uint32_t want_[] = {__VA_ARGS__};                                          \
		int n_ = (int)(sizeof(want_) / sizeof(want_[0]));                          \
		cr_assert_eq(chords[i].n, n_, "chord %d has %d keys, want %d", (i),        \
			     chords[i].n, n_);                                             \
		for (int k_ = 0; k_ < n_; k_++)                                            \
			cr_assert_eq(chords[i].keysyms[k_], want_[k_],                     \
				     "chord %d key %d: 0x%x, want 0x%x", (i), k_,          \
				     chords[i].keysyms[k_], want_[k_]);                    \
	} while (0)

#define assert_keys_ok(s)                                                                  \
	cr_assert_eq(keys(s), 0, "\"%s\": %s", (s), err.msg)

#define assert_keys_refused(s, want_msg)                                                        \
	do {                                                                               \
		cr_assert_eq(keys(s), -EINVAL, "\"%s\" accepted", (s));                     \
		cr_assert_str_eq(err.msg, (want_msg));                                          \
		cr_assert_eq(n_chords, 0);                                                 \
	} while (0)

Test(chords, single_and_combined)
{
	assert_keys_ok("ctrl+l");
	cr_assert_eq(n_chords, 1);
	assert_chord(0, 0xffe3, 0x6c);

	assert_keys_ok("ctrl+shift+Tab");
	cr_assert_eq(n_chords, 1);
	assert_chord(0, 0xffe3, 0xffe1, 0xff09);

	assert_keys_ok("Return");
	cr_assert_eq(n_chords, 1);
	assert_chord(0, 0xff0d);

	assert_keys_ok("super");
	assert_chord(0, 0xffeb);

	assert_keys_ok("ctrl+a BackSpace");
	cr_assert_eq(n_chords, 2);
	assert_chord(0, 0xffe3, 0x61);
	assert_chord(1, 0xff08);

	/* Written order is pressing order. */
	assert_keys_ok("shift+ctrl+plus");
	assert_chord(0, 0xffe1, 0xffe3, 0x2b);

	/* Runs of spaces separate like one; leading and trailing ones are
	 * ignored (xdotool gets its chords split by a shell). */
	assert_keys_ok("  ctrl+a   b  ");
	cr_assert_eq(n_chords, 2);
	assert_chord(0, 0xffe3, 0x61);
	assert_chord(1, 0x62);
}

Test(chords, refusals_name_the_key)
{
	assert_keys_refused("Retrun", "unknown key \"Retrun\" in \"Retrun\"");
	assert_keys_refused("ctrl+Retrun", "unknown key \"Retrun\" in \"ctrl+Retrun\"");
	assert_keys_refused("ctrl+a Retrun", "unknown key \"Retrun\" in \"ctrl+a Retrun\"");
	assert_keys_refused("ctrl++", "empty key name in \"ctrl++\" (write '+' as plus)");
	assert_keys_refused("+a", "empty key name in \"+a\" (write '+' as plus)");
	assert_keys_refused("ctrl+", "empty key name in \"ctrl+\" (write '+' as plus)");
	assert_keys_refused("a++b", "empty key name in \"a++b\" (write '+' as plus)");
	assert_keys_refused("+", "empty key name in \"+\" (write '+' as plus)");
	assert_keys_refused("", "no keys in \"\"");
	assert_keys_refused("   ", "no keys in \"   \"");
	assert_keys_refused("ctrl+ctrl", "key \"ctrl\" appears twice in one chord in \"ctrl+ctrl\"");
	assert_keys_refused("ctrl+Control_L",
			    "key \"Control_L\" appears twice in one chord in \"ctrl+Control_L\"");
	assert_keys_refused("ctrl+a\tb",
			    "control character \\x09 in \"ctrl+a\\x09b\" (chords are separated by "
			    "spaces)");
	assert_keys_refused("a\nb",
			    "control character \\x0a in \"a\\x0ab\" (chords are separated by "
			    "spaces)");
	/* Untrusted names are escaped in the message. */
	assert_keys_refused("\"x\xc3\xa4", "unknown key \"\\\"x\\xc3\\xa4\" in \"\\\"x\\xc3\\xa4\"");
	cr_assert_eq(dg_keys_parse(NULL, chords, 1, &n_chords, &err), -EINVAL);
}

Test(chords, limits)
{
	char buf[DG_ACTION_KEYS_MAX + 2];

	/* DG_CHORD_MAX keys in one chord, then one more. */
	assert_keys_ok("a+b+c+d+e+f+g+h");
	_Static_assert(DG_CHORD_MAX == 8, "the chord above has DG_CHORD_MAX keys");
	assert_chord(0, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h');
	assert_keys_refused("a+b+c+d+e+f+g+h+i",
			    "more than 8 keys in one chord in \"a+b+c+d+e+f+g+h+i\"");

	/* DG_ACTION_CHORDS_MAX chords, then one more. */
	buf[0] = '\0';
	for (int i = 0; i < DG_ACTION_CHORDS_MAX; i++)
		strcat(buf, "a ");
	assert_keys_ok(buf);
	cr_assert_eq(n_chords, DG_ACTION_CHORDS_MAX);
	strcat(buf, "a");
	cr_assert_eq(keys(buf), -EINVAL);
	cr_assert(strstr(err.msg, "more than 32 chords in"), "%s", err.msg);
	/* A caller's smaller array is respected. */
	cr_assert_eq(dg_keys_parse("a b c", chords, 2, &n_chords, &err), -EINVAL);
	cr_assert_eq(dg_keys_parse("a b", chords, 2, &n_chords, &err), 0);

	/* DG_ACTION_KEYS_MAX bytes, then one more. */
	memset(buf, ' ', DG_ACTION_KEYS_MAX);
	buf[0] = 'a';
	buf[DG_ACTION_KEYS_MAX] = '\0';
	assert_keys_ok(buf);
	cr_assert_eq(n_chords, 1);
	buf[DG_ACTION_KEYS_MAX] = ' ';
	buf[DG_ACTION_KEYS_MAX + 1] = '\0';
	assert_keys_refused(buf, "more than 8192 bytes");

	/* A name of DG_KEY_NAME_MAX bytes is looked up; one more is refused
	 * before lookup. */
	char name[DG_KEY_NAME_MAX + 2];
	memset(name, 'q', DG_KEY_NAME_MAX);
	name[DG_KEY_NAME_MAX] = '\0';
	cr_assert_eq(keys(name), -EINVAL);
	cr_assert(strstr(err.msg, "unknown key \"qqqq"), "%s", err.msg);
	name[DG_KEY_NAME_MAX] = 'q';
	name[DG_KEY_NAME_MAX + 1] = '\0';
	cr_assert_eq(keys(name), -EINVAL);
	cr_assert(strstr(err.msg, "is over 64 bytes"), "%s", err.msg);
}

Test(chords, format_is_canonical)
{
	char buf[256];
	assert_keys_ok("ctrl+a  return CONTROL+shift+€");
	cr_assert_eq(dg_keys_format(chords, n_chords, buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "Control_L+a Return Control_L+Shift_L+U20AC");
	/* The canonical form parses to the same chords. */
	struct dg_chord first[DG_ACTION_CHORDS_MAX];
	int n_first = n_chords;
	memcpy(first, chords, sizeof(first));
	assert_keys_ok(buf);
	cr_assert_eq(n_chords, n_first);
	cr_assert_eq(memcmp(first, chords, sizeof(first)), 0);
	/* Too small a buffer. */
	cr_assert_eq(dg_keys_format(chords, n_chords, buf, 10), -ENOSPC);
	cr_assert_eq(dg_keys_format(chords, n_chords, buf, 0), -ENOSPC);
}

/* The largest chords with the longest names still format within the keys
 * limit, so a canonical key action always parses back. */
Test(chords, longest_canonical_form_fits)
{
	/* The eight longest names of the headers (27 to 25 bytes). */
	static char in[DG_ACTION_KEYS_MAX + 1], out[DG_ACTION_KEYS_MAX + 1];
	const char *names[DG_CHORD_MAX] = {
		"XF86KbdInputAssistPrevgroup", "XF86KbdInputAssistNextgroup",
		"ISO_Discontinuous_Underline", "Greek_upsilonaccentdieresis",
		"Hangul_J_KkogjiDalrinIeung",  "topvertsummationconnector",
		"botvertsummationconnector",   "Ukrainian_ghe_with_upturn",
	};
	in[0] = '\0';
	for (int i = 0; i < DG_ACTION_CHORDS_MAX; i++) {
		for (int k = 0; k < DG_CHORD_MAX; k++) {
			strcat(in, k ? "+" : i ? " " : "");
			strcat(in, names[k]);
		}
	}
	assert_keys_ok(in);
	cr_assert_eq(n_chords, DG_ACTION_CHORDS_MAX);
	cr_assert_eq(dg_keys_format(chords, n_chords, out, sizeof(out)), 0);
	cr_assert_str_eq(out, in);
}

/* ---- text -------------------------------------------------------------------- */

static uint32_t out[64];
static size_t n_out;

static int text(const char *s, size_t len)
{
	memset(&err, 0, sizeof(err));
	memset(out, 0, sizeof(out));
	n_out = 12345;
	return dg_text_to_keysyms(s, len, out, sizeof(out) / sizeof(out[0]), &n_out, &err);
}

#define assert_text(s, ...)                                                                \
	do {                                                                               \
		uint32_t want_[] = {__VA_ARGS__};                                          \
		size_t n_ = sizeof(want_) / sizeof(want_[0]);                              \
		cr_assert_eq(text((s), sizeof(s) - 1), 0, "%s", err.msg);                  \
		cr_assert_eq(n_out, n_, "%zu keysyms, want %zu", n_out, n_);               \
		for (size_t k_ = 0; k_ < n_; k_++)                                         \
			cr_assert_eq(out[k_], want_[k_], "keysym %zu: 0x%x, want 0x%x", k_, \
				     out[k_], want_[k_]);                                  \
	} while (0)

#define assert_text_refused(s, want_msg)                                                        \
	do {                                                                               \
		cr_assert_eq(text((s), sizeof(s) - 1), -EINVAL, "accepted");               \
		cr_assert_str_eq(err.msg, (want_msg));                                          \
		cr_assert_eq(n_out, 0);                                                    \
	} while (0)

Test(text, ascii_and_latin1_keep_their_values)
{
	assert_text("Hi ~", 'H', 'i', ' ', '~');
	assert_text("é", 0xe9);
	assert_text("\xc2\xa0ÿ", 0xa0, 0xff);
}

Test(text, unicode_uses_the_unicode_keysyms)
{
	assert_text("漢字", 0x01006f22, 0x01005b57);
	assert_text("😀", 0x0101f600);
	assert_text("€", 0x010020ac);
	assert_text("\xc4\x80", 0x01000100);          /* U+0100, first above Latin-1 */
	assert_text("\xed\x9f\xbf", 0x0100d7ff);      /* below the surrogates */
	assert_text("\xee\x80\x80", 0x0100e000);      /* above them */
	assert_text("\xef\xbf\xbf", 0x0100ffff);
	assert_text("\xf4\x8f\xbf\xbf", 0x0110ffff);  /* U+10FFFF */
}

Test(text, line_breaks_and_tabs)
{
	assert_text("a\nb", 'a', 0xff0d, 'b');
	assert_text("\t", 0xff09);
	assert_text("a\r\nb", 'a', 0xff0d, 'b'); /* one Return, not two */
	assert_text("a\rb", 'a', 0xff0d, 'b');
	assert_text("\r\r\n\n", 0xff0d, 0xff0d, 0xff0d);
	assert_text("a\r", 'a', 0xff0d);
}

Test(text, controls_refused)
{
	assert_text_refused("a\bc", "control character U+0008 at byte 1 cannot be typed (only "
				    "\\n, \\r and \\t can; use a key action)");
	assert_text_refused("ab\x1b[31m", "control character U+001B at byte 2 cannot be typed "
					  "(only \\n, \\r and \\t can; use a key action)");
	assert_text_refused("\x7f", "control character U+007F at byte 0 cannot be typed (only "
				    "\\n, \\r and \\t can; use a key action)");
	assert_text_refused("\xc2\x80", "control character U+0080 at byte 0 cannot be typed "
					"(only \\n, \\r and \\t can; use a key action)");
	assert_text_refused("\xc2\x9f", "control character U+009F at byte 0 cannot be typed "
					"(only \\n, \\r and \\t can; use a key action)");
	/* NUL inside the given length. */
	assert_text_refused("a\0b", "control character U+0000 at byte 1 cannot be typed (only "
				    "\\n, \\r and \\t can; use a key action)");
}

Test(text, invalid_utf8_refused)
{
	assert_text_refused("a\x80", "invalid UTF-8 at byte 1 (stray continuation byte)");
	assert_text_refused("\xc3", "invalid UTF-8 at byte 0 (truncated sequence)");
	assert_text_refused("\xe6\xbc", "invalid UTF-8 at byte 0 (truncated sequence)");
	assert_text_refused("\xf0\x9f\x98", "invalid UTF-8 at byte 0 (truncated sequence)");
	assert_text_refused("\xc3\x28", "invalid UTF-8 at byte 0 (truncated sequence)");
	assert_text_refused("\xc0\xaf", "invalid UTF-8 at byte 0 (overlong encoding)");
	assert_text_refused("\xc0\x80", "invalid UTF-8 at byte 0 (overlong encoding)");
	assert_text_refused("\xc1\xbf", "invalid UTF-8 at byte 0 (overlong encoding)");
	assert_text_refused("\xe0\x80\xaf", "invalid UTF-8 at byte 0 (overlong encoding)");
	assert_text_refused("\xe0\x9f\xbf", "invalid UTF-8 at byte 0 (overlong encoding)");
	assert_text_refused("\xf0\x80\x80\xaf", "invalid UTF-8 at byte 0 (overlong encoding)");
	assert_text_refused("\xf0\x8f\xbf\xbf", "invalid UTF-8 at byte 0 (overlong encoding)");
	assert_text_refused("\xed\xa0\x80", "invalid UTF-8 at byte 0 (surrogate)");
	assert_text_refused("\xed\xbf\xbf", "invalid UTF-8 at byte 0 (surrogate)");
	assert_text_refused("\xf4\x90\x80\x80", "invalid UTF-8 at byte 0 (above U+10FFFF)");
	assert_text_refused("\xf7\xbf\xbf\xbf", "invalid UTF-8 at byte 0 (above U+10FFFF)");
	assert_text_refused("\xf8\x88\x80\x80\x80", "invalid UTF-8 at byte 0 (invalid lead byte)");
	assert_text_refused("ok\xff", "invalid UTF-8 at byte 2 (invalid lead byte)");
	assert_text_refused("\xfe", "invalid UTF-8 at byte 0 (invalid lead byte)");
}

Test(text, counting_and_buffer_bounds)
{
	size_t n = 0;
	/* out NULL: validate and count only. */
	cr_assert_eq(dg_text_to_keysyms("a\r\né😀", 9, NULL, 0, &n, &err), 0, "%s", err.msg);
	cr_assert_eq(n, 4);
	/* Exactly enough room, then one short. */
	uint32_t small[4];
	cr_assert_eq(dg_text_to_keysyms("abcd", 4, small, 4, &n, &err), 0);
	cr_assert_eq(n, 4);
	cr_assert_eq(dg_text_to_keysyms("abcde", 5, small, 4, &n, &err), -ENOBUFS);
	cr_assert_eq(n, 0);
	/* Empty text is no keysyms. */
	cr_assert_eq(dg_text_to_keysyms("", 0, small, 4, &n, &err), 0);
	cr_assert_eq(n, 0);
}

Test(text, codepoint_rule)
{
	uint32_t k;
	cr_assert_eq(dg_keysym_from_codepoint(0x20, &k), 0);
	cr_assert_eq(k, 0x20);
	cr_assert_eq(dg_keysym_from_codepoint(0x7e, &k), 0);
	cr_assert_eq(k, 0x7e);
	cr_assert_eq(dg_keysym_from_codepoint(0xa0, &k), 0);
	cr_assert_eq(k, 0xa0);
	cr_assert_eq(dg_keysym_from_codepoint(0xff, &k), 0);
	cr_assert_eq(k, 0xff);
	cr_assert_eq(dg_keysym_from_codepoint(0x100, &k), 0);
	cr_assert_eq(k, 0x01000100);
	cr_assert_eq(dg_keysym_from_codepoint('\n', &k), 0);
	cr_assert_eq(k, 0xff0d);
	cr_assert_eq(dg_keysym_from_codepoint(0x1f, &k), -EINVAL);
	cr_assert_eq(dg_keysym_from_codepoint(0x7f, &k), -EINVAL);
	cr_assert_eq(dg_keysym_from_codepoint(0x9f, &k), -EINVAL);
	cr_assert_eq(dg_keysym_from_codepoint(0xd800, &k), -EINVAL);
	cr_assert_eq(dg_keysym_from_codepoint(0xdfff, &k), -EINVAL);
	cr_assert_eq(dg_keysym_from_codepoint(0x110000, &k), -EINVAL);
	cr_assert_eq(dg_keysym_from_codepoint(0xffffffff, &k), -EINVAL);
}

/* ---- the US layout's Shift level ------------------------------------------ */

#define XKB_DIR "/usr/share/X11/xkb/symbols"

/* Reads the two-level keys `key <NAME> { [ level1, level2 ] };` of the
 * xkb_symbols section `section` of an XKB symbols file (only the key named
 * only, when not NULL) into pairs (keysyms by their X names); returns how
 * many. */
static size_t read_xkb_levels(const char *path, const char *section, const char *only,
			      uint32_t (*pairs)[2], size_t cap)
{
	FILE *f = fopen(path, "r");
	cr_assert(f, "cannot open %s (xkb-data)", path);
	char line[512], want[128];
	snprintf(want, sizeof(want), "xkb_symbols \"%s\"", section);
	bool in = false;
	size_t n = 0;
	while (fgets(line, sizeof(line), f)) {
		if (!in) {
			in = strstr(line, want) != NULL;
			continue;
		}
		if (strncmp(line, "};", 2) == 0)
			break;
		char name[16], l1[64], l2[64];
		int end = 0;
		if (sscanf(line, " key <%15[^>]> { [ %63[^, \t] , %63[^],\t ] ] } ;%n", name, l1, l2,
			   &end) != 3 || end == 0)
			continue;
		if (only && strcmp(name, only) != 0)
			continue;
		cr_assert_lt(n, cap);
		cr_assert_eq(dg_keysym_from_name(l1, &pairs[n][0]), 0, "%s: %s", path, l1);
		cr_assert_eq(dg_keysym_from_name(l2, &pairs[n][1]), 0, "%s: %s", path, l2);
		n++;
	}
	fclose(f);
	cr_assert(in, "no section %s in %s", section, path);
	return n;
}

/* The table is exactly the layout Xvnc runs: every two-level key of "us"
 * (basic), the Tab key of "pc" and the keypad of "keypad" (x11) map both
 * ways, and nothing else does. */
Test(us_shift, table_is_the_xkb_us_layout)
{
	uint32_t pairs[128][2];
	size_t n = read_xkb_levels(XKB_DIR "/us", "basic", NULL, pairs, 100);
	cr_assert_eq(n, 47, "%zu two-level keys in us(basic)", n);
	n += read_xkb_levels(XKB_DIR "/pc", "pc105", "TAB", pairs + n, 128 - n);
	size_t n_keypad = read_xkb_levels(XKB_DIR "/keypad", "x11", NULL, pairs + n, 128 - n);
	cr_assert_eq(n_keypad, 12, "%zu two-level keys in keypad(x11)", n_keypad);
	n += n_keypad;
	size_t with_levels = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t a = pairs[i][0], b = pairs[i][1], got;
		if (a == b)
			continue;
		with_levels++;
		cr_assert_eq(dg_keysym_us_shifted(a, &got), 0, "0x%x has no Shift level", a);
		cr_assert_eq(got, b, "0x%x with Shift: 0x%x, want 0x%x", a, got, b);
		cr_assert_eq(dg_keysym_us_unshifted(b, &got), 0, "0x%x is not a Shift level", b);
		cr_assert_eq(got, a, "0x%x without Shift: 0x%x, want 0x%x", b, got, a);
	}
	/* Nothing beyond the layout: count every keysym the table knows of in
	 * the ranges it could hold. */
	size_t known = 0;
	for (uint32_t k = 0; k <= 0xffff; k++) {
		uint32_t got;
		if (dg_keysym_us_shifted(k, &got) == 0)
			known++;
	}
	cr_assert_eq(known, with_levels, "%zu keysyms with a Shift level, the layout has %zu",
		     known, with_levels);
	/* 47 of us(basic), Tab, 11 of the keypad (KPPT is KP_Decimal twice) */
	cr_assert_eq(with_levels, 59);
}

Test(us_shift, examples_and_refusals)
{
	uint32_t got;
	cr_assert_eq(dg_keysym_us_shifted('a', &got), 0);
	cr_assert_eq(got, 'A');
	cr_assert_eq(dg_keysym_us_shifted('1', &got), 0);
	cr_assert_eq(got, '!');
	cr_assert_eq(dg_keysym_us_shifted('/', &got), 0);
	cr_assert_eq(got, '?');
	cr_assert_eq(dg_keysym_us_shifted(0xff09, &got), 0); /* Tab */
	cr_assert_eq(got, 0xfe20);                            /* ISO_Left_Tab */
	cr_assert_eq(dg_keysym_us_unshifted(0xffb1, &got), 0); /* KP_1 */
	cr_assert_eq(got, 0xff9c);                             /* KP_End */
	cr_assert_eq(dg_keysym_us_unshifted('Z', &got), 0);
	cr_assert_eq(got, 'z');
	cr_assert_eq(dg_keysym_us_unshifted('"', &got), 0);
	cr_assert_eq(got, '\'');
	/* No other level: already shifted, not on the layout, or a function key. */
	uint32_t none[] = {'A', '!', ' ', 0xe9 /* é */, 0xc9 /* É */, 0xff0d /* Return */,
			   0xffe1 /* Shift_L */, 0x01006f22 /* 漢 */};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		cr_assert_eq(dg_keysym_us_shifted(none[i], &got), -ENOENT, "0x%x", none[i]);
	uint32_t lower[] = {'a', '1', ' ', 0xe9, 0xc9, 0xff0d, 0xff09, 0xffe1};
	for (size_t i = 0; i < sizeof(lower) / sizeof(lower[0]); i++)
		cr_assert_eq(dg_keysym_us_unshifted(lower[i], &got), -ENOENT, "0x%x", lower[i]);
}

Test(us_shift, modifiers)
{
	cr_assert(dg_keysym_is_shift(0xffe1) && dg_keysym_is_shift(0xffe2));
	cr_assert_not(dg_keysym_is_shift(0xffe3));
	uint32_t mods[] = {0xffe1, 0xffe2, 0xffe3, 0xffe4, 0xffe5, 0xffe7, 0xffe9, 0xffeb, 0xffee,
			   0xfe03 /* ISO_Level3_Shift */};
	for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++)
		cr_assert(dg_keysym_is_modifier(mods[i]), "0x%x", mods[i]);
	uint32_t keys[] = {'a', 'A', 0xff09, 0xff0d, 0xffe0, 0xffef, 0xfe20 /* ISO_Left_Tab */};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_assert_not(dg_keysym_is_modifier(keys[i]), "0x%x", keys[i]);
}

/* The keymap's edge: what Xvnc has keys for, and what is committed as
 * text (the code point back from its keysym) because it has none. */
Test(us_keymap, edges_and_code_points)
{
	uint32_t in[] = {0x20, 'a', 0x7e, 0xff00, 0xff0d, 0xffe1, 0xffff};
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		cr_assert(dg_keysym_in_us_keymap(in[i]), "0x%x", in[i]);
		cr_assert_eq(dg_keysym_codepoint(in[i]), 0, "0x%x", in[i]);
	}
	/* U+FF0C (fullwidth comma) is the Unicode keysym 0x0100ff0c, not a
	 * function key: a mask of its low bits alone took it for one. */
	struct { uint32_t ks, cp; } out[] = {
		{0xa0, 0xa0}, {0xe9, 0xe9}, {0xff, 0xff}, {0x01000100, 0x100},
		{0x0100ff0c, 0xff0c}, {0x01006f22, 0x6f22}, {0x0101f600, 0x1f600},
		{0x0110ffff, 0x10ffff},
	};
	for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
		cr_assert_not(dg_keysym_in_us_keymap(out[i].ks), "0x%x", out[i].ks);
		cr_assert_eq(dg_keysym_codepoint(out[i].ks), out[i].cp, "0x%x", out[i].ks);
		uint32_t back;
		cr_assert_eq(dg_keysym_from_codepoint(out[i].cp, &back), 0);
		cr_assert_eq(back, out[i].ks, "U+%04X", out[i].cp);
	}
	/* Neither a key nor text: a legacy keysym, one past the Unicode range,
	 * ISO_Left_Tab (a chord's keysym, never typed as text). */
	uint32_t neither[] = {0x7f, 0x9f, 0x20ac, 0x01110000, 0xfe20};
	for (size_t i = 0; i < sizeof(neither) / sizeof(neither[0]); i++) {
		cr_assert_not(dg_keysym_in_us_keymap(neither[i]), "0x%x", neither[i]);
		cr_assert_eq(dg_keysym_codepoint(neither[i]), 0, "0x%x", neither[i]);
	}
}
