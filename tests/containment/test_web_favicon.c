/* The favicon over HTTP (issue #13): a real `deskgate serve` answers
 * /favicon.ico and the pages' icon link without a token, as an image, and
 * nothing else became public with it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dg_test.h"

static struct dg_server srv;

static void setup(void)
{
	char err[2048];
	cr_assert_eq(dg_test_serve_start(&srv, "", 30, err, sizeof(err)), 0, "%s", err);
}

static void teardown(void)
{
	if (srv.pid > 0)
		dg_test_serve_stop(&srv, 30, false);
}

TestSuite(web_favicon, .init = setup, .fini = teardown, .timeout = 120);

/* The value of header name (lowercase, with the colon) in head, copied. */
static void header(const char *head, const char *name, char *out, size_t len)
{
	out[0] = '\0';
	for (const char *p = head; p && *p; p = strstr(p, "\r\n") ? strstr(p, "\r\n") + 2 : NULL) {
		if (strncasecmp(p, name, strlen(name)) != 0)
			continue;
		p += strlen(name);
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, "\r\n");
		snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p);
		return;
	}
}

/* GET path (token NULL: none): its status, and the body when 200 must be
 * the favicon with its image type. */
static void get_icon(const char *path, const char *token)
{
	struct dg_http r;
	cr_assert_eq(dg_test_http(srv.port, "GET", path, token, NULL, 10, &r), 0, "GET %s", path);
	cr_assert_eq(r.status, 200, "GET %s without a token: %d %s", path, r.status, r.body);
	char type[128];
	header(r.head, "content-type:", type, sizeof(type));
	cr_assert_str_eq(type, "image/svg+xml", "GET %s: content type \"%s\"", path, type);
	char *file = dg_test_read_file(DG_SOURCE_DIR "/web/favicon.svg");
	cr_assert_eq(r.body_len, strlen(file), "GET %s: %zu bytes, the file has %zu", path, r.body_len,
		     strlen(file));
	cr_assert(memcmp(r.body, file, r.body_len) == 0, "GET %s: not web/favicon.svg", path);
	free(file);
	dg_http_free(&r);
}

static int status(const char *method, const char *path, const char *token)
{
	struct dg_http r;
	const char *body = strcmp(method, "GET") == 0 ? NULL : "{}";
	cr_assert_eq(dg_test_http(srv.port, method, path, token, body, 10, &r), 0, "%s %s", method, path);
	int s = r.status;
	dg_http_free(&r);
	return s;
}

Test(web_favicon, served_without_a_token)
{
	get_icon("/favicon.ico", NULL);
	get_icon("/favicon.ico", DG_TEST_VIEWER_TOKEN);
	get_icon("/favicon.ico?v=1", NULL);
}

/* The icon each page links to resolves, relative to the page, to the
 * favicon: the same answer without a token. */
Test(web_favicon, the_pages_link_it)
{
	static const char *const pages[] = {"/", "/index.html", "/live.html", "/player.html",
					    "/approvals.html", "/blast.html"};
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		struct dg_http r;
		cr_assert_eq(dg_test_http(srv.port, "GET", pages[i], NULL, NULL, 10, &r), 0);
		cr_assert_eq(r.status, 200, "GET %s: %d", pages[i], r.status);
		const char *link = strstr(r.body, "<link rel=\"icon\" href=\"");
		cr_assert(link, "%s has no icon link", pages[i]);
		link += strlen("<link rel=\"icon\" href=\"");
		size_t n = strcspn(link, "\"");
		cr_assert(n > 0 && n < 64 && !memchr(link, '/', n), "%s: icon href \"%.*s\" is not a "
			  "name beside the page", pages[i], (int)n, link);
		char path[80];
		snprintf(path, sizeof(path), "/%.*s", (int)n, link);
		dg_http_free(&r);
		get_icon(path, NULL);
	}
}

/* Nothing else opened: the API still wants a token, and only the exact
 * favicon path is an alias. */
Test(web_favicon, other_paths_still_need_a_token)
{
	static const char *const private[] = {"/metrics", "/v1/sessions", "/v1/approvals",
					      "/v1/policies", "/favicon.ico/x", "/favicon.icox",
					      "/favicon", "/Favicon.ico", "/v1/favicon.ico"};
	for (size_t i = 0; i < sizeof(private) / sizeof(private[0]); i++)
		cr_assert_eq(status("GET", private[i], NULL), 401, "GET %s without a token", private[i]);
	cr_assert_eq(status("POST", "/favicon.ico", NULL), 401, "POST /favicon.ico");
	cr_assert_eq(status("DELETE", "/favicon.ico", NULL), 401, "DELETE /favicon.ico");
	cr_assert_eq(status("GET", "/metrics", DG_TEST_VIEWER_TOKEN), 200);
}
