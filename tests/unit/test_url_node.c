/* Differential fuzzing of the strict URL checker (policy/url.c) against
 * Node's new URL() (the WHATWG parser, as in Chromium).
 *
 * A seeded PRNG makes a few thousand URL-ish strings: canonical samples
 * mutated with tricky characters, case flips, dots, digits, brackets and
 * ports, plus hosts assembled from numeric, hex and IPv6 pieces. Node reads
 * them all in one run of tests/unit/url_oracle.js (started with execve and an
 * argv array, no shell). Every input the checker accepts must parse in Node
 * to exactly the same href, with the same hostname, port, path and query.
 * Node is required: without it the test fails and says so. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "dg_test.h"
#include "policy/policy.h"

#define N_INPUTS 5000 /* per round: node's output stays under DG_TEST_OUT_MAX */
#define ROUNDS 4
#define INPUT_MAX 300
#define SEED 0x5eed0f0bu

/* xorshift64*: fixed seed, so a failure replays exactly. */
static uint64_t rng;
static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}
static size_t pick(size_t n)
{
	return (size_t)(rnd() % n);
}
#define PICK(arr) ((arr)[pick(sizeof(arr) / sizeof((arr)[0]))])

/* Canonical URLs the checker accepts, to start mutations from. */
static const char *const seeds[] = {
	"http://example.com/",
	"https://www.example.com/a/b.html?x=1&y=2#top",
	"https://a.b.c.example.org:8443/path/to/x?q=%2F",
	"http://1.2.3.4/",
	"http://255.255.255.255:65535/",
	"http://10.0.0.1:8080/x",
	"http://[::1]/",
	"https://[2001:db8::1]:8443/",
	"http://[::ffff:c000:280]/",
	"http://[1:0:0:2::3]/",
	"http://localhost:3000/api?k=v",
	"https://en.wikipedia.org/wiki/Special:Random",
	"http://a--b.c0m/x..y/...",
	"http://1.2.3.com/",
	"https://example.1a/#f",
	"http://x.y/%41%2e/~user/!$&'()*+,;=:@",
	"https://a.com/?",
	"https://a.com/#",
};

/* Pieces that move parsers: separators, numbers, escapes, whitespace,
 * non-ASCII look-alikes (fullwidth and ideographic dots), markup. */
static const char *const tokens[] = {
	".",      "..",     "/",      "//",     "/./",    "/../",   "%2e",    "%2E",
	"%",      "%4",     "%41",    "%00",    "@",      ":",      "::",     "[",
	"]",      "[::1]",  "0x",     "0X",     "0",      "00",     "1",      "255",
	"256",    "4294967295",       ":0",     ":80",    ":443",   ":65535", ":65536",
	":08080", "?",      "#",      "\\",     "\t",     "\n",     "\r",     " ",
	"\x7f",   "\x01",   "\x1f",   "\xc3\xa9",         "\xef\xbc\x8e",     "\xe3\x80\x82",
	"\xc2\xad",         "xn--",   "xn--zca",          "-",      "_",      "'",
	"\"",     "<",      ">",      "`",      "{",      "}",      "^",      "|",
	"~",      "!",      "$",      "&",      "(",      ")",      "*",      "+",
	",",      ";",      "=",      "A",      "Z",      "HTTP",   "ffff",   "1.2.3.4",
	"example",          ".com",   "0177",   "0x7f",   "ffff:",  ":ffff",  "::ffff:1.2.3.4",
	"%5B",    "%3A",    "%40",    "%2F",    "https:", "//",     "a",      "9",
};

static void insert(char *buf, size_t *len, size_t at, const char *s, size_t n)
{
	if (*len + n > INPUT_MAX)
		return;
	memmove(buf + at + n, buf + at, *len - at);
	memcpy(buf + at, s, n);
	*len += n;
	buf[*len] = '\0';
}

static void mutate(char *buf, size_t *len)
{
	size_t at = pick(*len + 1);
	switch (pick(7)) {
	case 0:
	case 1: {
		const char *t = PICK(tokens);
		insert(buf, len, at, t, strlen(t));
		break;
	}
	case 2: /* delete a span */
		if (at < *len) {
			size_t n = 1 + pick(3);
			if (at + n > *len)
				n = *len - at;
			memmove(buf + at, buf + at + n, *len - at - n + 1);
			*len -= n;
		}
		break;
	case 3: /* flip case */
		if (at < *len && ((buf[at] | 0x20) >= 'a' && (buf[at] | 0x20) <= 'z'))
			buf[at] ^= 0x20;
		break;
	case 4: { /* replace with a token's first byte */
		const char *t = PICK(tokens);
		if (at < *len)
			buf[at] = t[0];
		break;
	}
	case 5: { /* a run of digits */
		char d[8];
		size_t n = 1 + pick(6);
		for (size_t i = 0; i < n; i++)
			d[i] = (char)('0' + pick(10));
		insert(buf, len, at, d, n);
		break;
	}
	default: { /* duplicate a span */
		if (at < *len) {
			char span[16];
			size_t n = 1 + pick(sizeof(span));
			if (at + n > *len)
				n = *len - at;
			memcpy(span, buf + at, n);
			insert(buf, len, pick(*len + 1), span, n);
		}
		break;
	}
	}
}

/* A host from numeric, hex and name pieces, or an IPv6 text form with
 * random zero runs, compression point and leading zeros. */
static void gen_host(char *out, size_t cap)
{
	size_t o = 0;
	out[0] = '\0';
	if (pick(4) == 0) {
		unsigned piece[8];
		for (int i = 0; i < 8; i++)
			piece[i] = pick(3) ? 0 : (unsigned)pick(pick(2) ? 16 : 65536);
		int cut = pick(2) ? (int)pick(8) : -1, cut_len = 1 + (int)pick(4);
		o += (size_t)snprintf(out + o, cap - o, "[");
		for (int i = 0; i < 8 && o < cap; i++) {
			if (i == cut) {
				o += (size_t)snprintf(out + o, cap - o, i == 0 ? "::" : ":");
				i += cut_len - 1;
				continue;
			}
			o += (size_t)snprintf(out + o, cap - o, pick(5) ? "%x%s" : "0%x%s",
					      piece[i], i == 7 || i + 1 == cut ? "" : ":");
		}
		if (o < cap)
			snprintf(out + o, cap - o, "]");
		return;
	}
	size_t labels = 1 + pick(5);
	for (size_t l = 0; l < labels && o < cap; l++) {
		if (l)
			o += (size_t)snprintf(out + o, cap - o, ".");
		switch (pick(5)) {
		case 0:
			o += (size_t)snprintf(out + o, cap - o, "%zu", pick(pick(2) ? 300 : 70000));
			break;
		case 1:
			o += (size_t)snprintf(out + o, cap - o, "0x%zx", pick(300));
			break;
		case 2:
			o += (size_t)snprintf(out + o, cap - o, "0%zo", pick(300));
			break;
		default:
			o += (size_t)snprintf(out + o, cap - o, "%s",
					      PICK(((const char *[]){"a", "ex", "com", "b-c", "x1",
								      "1x", "0xg", "org"})));
		}
	}
}

static void gen(char *buf, size_t *len)
{
	if (pick(3) == 0) {
		char host[128];
		gen_host(host, sizeof(host));
		const char *port = pick(3) ? "" : PICK(((const char *[]){":1", ":80", ":443",
									  ":8080", ":0", ":65536"}));
		snprintf(buf, INPUT_MAX + 1, "%s://%s%s/%s", pick(2) ? "http" : "https", host,
			 port, pick(2) ? "" : "p?q#f");
		*len = strlen(buf);
	} else {
		snprintf(buf, INPUT_MAX + 1, "%s", PICK(seeds));
		*len = strlen(buf);
	}
	for (size_t m = pick(4); m > 0; m--)
		mutate(buf, len);
}

/* Same comparison as in test_url.c: NULL when Node agrees with what we
 * accepted, else what differs. */
static const char *disagreement(const char *input, const struct dg_url *u, const json_t *r)
{
	char want[16];
	const char *href = json_string_value(json_object_get(r, "href"));
	const char *hostname = json_string_value(json_object_get(r, "hostname"));
	const char *port = json_string_value(json_object_get(r, "port"));
	const char *pathname = json_string_value(json_object_get(r, "pathname"));
	const char *search = json_string_value(json_object_get(r, "search"));
	if (!json_is_true(json_object_get(r, "ok")))
		return "Node refuses it";
	if (!href || strcmp(href, input) != 0)
		return "href differs from the input";
	if (!hostname || strcmp(hostname, u->host) != 0)
		return "hostname differs";
	snprintf(want, sizeof(want), "%u", (unsigned)u->port);
	if (!port || strcmp(port, u->port_given ? want : "") != 0)
		return "port differs";
	if (!pathname || strlen(pathname) != u->path_len ||
	    strncmp(pathname, u->path, u->path_len) != 0)
		return "pathname differs";
	size_t slen = u->query && u->query_len ? u->query_len + 1 : 0;
	if (!search || strlen(search) != slen ||
	    (slen && (search[0] != '?' || strncmp(search + 1, u->query, u->query_len) != 0)))
		return "search differs";
	return NULL;
}

/* The absolute path of `node` from PATH, or NULL. */
static char *find_node(void)
{
	const char *path = getenv("PATH");
	char *dirs = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	cr_assert_not_null(dirs);
	char *save = NULL, *found = NULL;
	for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char *cand = NULL;
		cr_assert(asprintf(&cand, "%s/node", d) > 0);
		if (access(cand, X_OK) == 0)
			found = cand;
		else
			free(cand);
	}
	free(dirs);
	return found;
}

/* Input shown for a log line: printable ASCII as is, other bytes as \xNN. */
static void show(const char *s, char *out, size_t cap)
{
	size_t o = 0;
	for (; *s && o + 5 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		o += (size_t)snprintf(out + o, cap - o, c > 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
	}
	out[o] = '\0';
}

/* Totals over all rounds. */
struct tally {
	size_t inputs, node_ok, accepted, accepted_ip, refused, canon_refused, disagreements;
};

/* An input's "http" scheme as "ws" ("https" as "wss"), for the WebSocket
 * round: ws and wss are WHATWG special schemes with http's rules. */
static void to_ws(char *buf, size_t *len)
{
	if (*len >= 4 && strncmp(buf, "http", 4) == 0) {
		buf[0] = 'w';
		buf[1] = 's';
		memmove(buf + 2, buf + 4, *len - 4 + 1);
		*len -= 2;
	}
}

/* One round: N_INPUTS inputs from the PRNG's current state, one node run.
 * ws: inputs are WebSocket URLs, checked by dg_url_parse_ws. */
static void round_run(const char *node, struct tally *t, bool ws)
{
	static char inputs[N_INPUTS][INPUT_MAX + 1];
	size_t text_cap = (size_t)N_INPUTS * (2 * INPUT_MAX + 1) + 1, o = 0;
	char *text = malloc(text_cap);
	cr_assert_not_null(text);
	for (size_t i = 0; i < N_INPUTS; i++) {
		size_t len = 0;
		gen(inputs[i], &len);
		if (ws)
			to_ws(inputs[i], &len);
		for (size_t k = 0; k < len; k++)
			o += (size_t)snprintf(text + o, text_cap - o, "%02x",
					      (unsigned char)inputs[i][k]);
		text[o++] = '\n';
	}
	text[o] = '\0';
	char *file = dg_test_write_tmp("urls.hex", text);
	free(text);

	const char *argv[] = {node, DG_SOURCE_DIR "/tests/unit/url_oracle.js", file, NULL};
	struct dg_run r;
	int rc = dg_test_run(argv, NULL, NULL, 0, 120.0, -1, &r);
	dg_test_rm_tmp(file);
	cr_assert_eq(rc, 0, "cannot run %s", node);
	cr_assert_eq(r.exit_code, 0, "node exited %d: %s", r.exit_code, r.err);
	cr_assert(r.out_len < DG_TEST_OUT_MAX, "node's output was cut");

	char *save = NULL, *line = strtok_r(r.out, "\n", &save);
	for (size_t i = 0; i < N_INPUTS; i++, line = strtok_r(NULL, "\n", &save)) {
		cr_assert_not_null(line, "node printed only %zu lines of %d", i, N_INPUTS);
		json_error_t je;
		json_t *res = json_loads(line, 0, &je);
		cr_assert_not_null(res, "node line %zu: %s", i, je.text);
		bool n_ok = json_is_true(json_object_get(res, "ok"));
		t->inputs++;
		t->node_ok += n_ok;
		struct dg_url u;
		struct dg_err err = {{0}};
		char shown[4 * INPUT_MAX + 8];
		show(inputs[i], shown, sizeof(shown));
		if ((ws ? dg_url_parse_ws(inputs[i], &u, &err) : dg_url_parse(inputs[i], &u, &err)) == 0) {
			t->accepted++;
			t->accepted_ip += u.host_is_ip;
			const char *why = disagreement(inputs[i], &u, res);
			if (why) {
				t->disagreements++;
				cr_log_error("accepted \"%s\" but %s: %s", shown, why, line);
			}
		} else {
			t->refused++;
			/* An http(s) URL canonical in Node's eyes and refused by
			 * us: on purpose (see url.c), a few shown so a drift
			 * towards refusing too much stays visible. */
			const char *href = json_string_value(json_object_get(res, "href"));
			if (n_ok && href && strcmp(href, inputs[i]) == 0 &&
			    (strncmp(href, "http://", 7) == 0 || strncmp(href, "https://", 8) == 0)) {
				if (t->canon_refused++ < 6)
					fprintf(stderr, "canonical in Node, refused: %s (%s)\n",
						shown, err.msg);
			}
		}
		json_decref(res);
	}
	cr_assert_null(line, "node printed more lines than inputs");
	dg_run_free(&r);
}

Test(url_node, differential, .timeout = 240)
{
	char *node = find_node();
	cr_assert_not_null(node, "node is not installed (not on PATH): this test compares the "
			   "URL checker with Node's new URL(); install nodejs (see .ci/setup.sh)");
	struct tally t = {0};
	rng = SEED;
	for (int i = 0; i < ROUNDS; i++)
		round_run(node, &t, false);
	free(node);
	char msg[512];
	snprintf(msg, sizeof(msg),
		 "node differential (seed 0x%x): %zu inputs, %zu parsed by Node, %zu accepted "
		 "(%zu with an IP host), %zu refused (%zu of them canonical http(s) in Node), "
		 "%zu disagreements",
		 SEED, t.inputs, t.node_ok, t.accepted, t.accepted_ip, t.refused, t.canon_refused,
		 t.disagreements);
	cr_log_info("%s", msg);
	fprintf(stderr, "%s\n", msg);
	cr_assert_eq(t.disagreements, 0);
	cr_assert(t.accepted >= t.inputs / 10, "only %zu accepted: the fuzz hardly exercised "
		  "the checker", t.accepted);
	cr_assert(t.accepted_ip >= 50, "only %zu IP hosts accepted", t.accepted_ip);
}

/* The same for WebSocket URLs (dg_url_parse_ws): what it accepts, Node
 * reads the same way. */
Test(url_node, differential_ws, .timeout = 240)
{
	char *node = find_node();
	cr_assert_not_null(node, "node is not installed (not on PATH): this test compares the "
			   "URL checker with Node's new URL(); install nodejs (see .ci/setup.sh)");
	struct tally t = {0};
	rng = SEED ^ 0x77u;
	for (int i = 0; i < 2; i++)
		round_run(node, &t, true);
	free(node);
	fprintf(stderr, "node differential, ws: %zu inputs, %zu accepted, %zu disagreements\n",
		t.inputs, t.accepted, t.disagreements);
	cr_assert_eq(t.disagreements, 0);
	cr_assert(t.accepted >= t.inputs / 10, "only %zu accepted", t.accepted);
}
