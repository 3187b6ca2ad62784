/* The embedded web files (gateway/web-priv.h): which path serves which file,
 * the favicon at its own path and at the one browsers ask for, and every
 * page linking to it (issue #13). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dg_test.h"
#include "web-priv.h"

#define ICON_LINK "<link rel=\"icon\" href=\"" DG_WEB_FAVICON "\" type=\"image/svg+xml\">"

Test(web, favicon_at_both_paths)
{
	const struct dg_web_file *ico = dg_web_find(DG_WEB_FAVICON_PATH);
	const struct dg_web_file *svg = dg_web_find("/" DG_WEB_FAVICON);
	cr_assert(ico, "%s serves nothing", DG_WEB_FAVICON_PATH);
	cr_assert_eq(ico, svg, "%s and /%s serve different files", DG_WEB_FAVICON_PATH, DG_WEB_FAVICON);
	cr_assert_str_eq(ico->name, DG_WEB_FAVICON);
	cr_assert_str_eq(ico->content_type, "image/svg+xml");
	/* The embedded bytes are web/favicon.svg's, an SVG document. */
	char *file = dg_test_read_file(DG_SOURCE_DIR "/web/" DG_WEB_FAVICON);
	cr_assert_eq(ico->len, strlen(file));
	cr_assert(memcmp(ico->data, file, ico->len) == 0);
	cr_assert(strncmp(file, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39) == 0);
	free(file);
}

Test(web, favicon_paths_are_exact)
{
	static const char *const none[] = {
		"/favicon.ico/", "/favicon.ic", "/favicon.icoo", "/Favicon.ico", "//favicon.ico",
		"/favicon.ico%00", "/./favicon.ico", "favicon.ico", "/favicon.svg/", "/favicon",
		"/web/favicon.svg", "/../web/favicon.svg", "",
	};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		cr_assert_null(dg_web_find(none[i]), "\"%s\" serves a file", none[i]);
	cr_assert_null(dg_web_find(NULL));
}

Test(web, other_paths_unchanged)
{
	const struct dg_web_file *index = dg_web_find("/");
	cr_assert(index);
	cr_assert_str_eq(index->name, "index.html");
	cr_assert_eq(dg_web_find("/index.html"), index);
	cr_assert_str_eq(dg_web_find("/style.css")->content_type, "text/css; charset=utf-8");
	cr_assert_str_eq(dg_web_find("/common.js")->content_type, "text/javascript; charset=utf-8");
	cr_assert_null(dg_web_find("/metrics"));
	cr_assert_null(dg_web_find("/healthz"));
}

/* Each page names the icon once, in its head. */
Test(web, every_page_links_the_favicon)
{
	int pages = 0;
	for (size_t i = 0; i < dg_web_n_files; i++) {
		const struct dg_web_file *f = &dg_web_files[i];
		size_t n = strlen(f->name);
		if (n < 5 || strcmp(f->name + n - 5, ".html") != 0)
			continue;
		pages++;
		char *text = strndup((const char *)f->data, f->len);
		char *link = strstr(text, ICON_LINK);
		char *head_end = strstr(text, "</head>");
		cr_assert(link, "%s has no %s", f->name, ICON_LINK);
		cr_assert(head_end && link < head_end, "%s: the icon link is not in the head", f->name);
		cr_assert_null(strstr(link + strlen(ICON_LINK), "rel=\"icon\""), "%s names two icons",
			       f->name);
		free(text);
	}
	cr_assert_geq(pages, 5, "only %d pages embedded", pages);
}
