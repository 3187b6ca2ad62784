/* The web pages (web/) the gateway serves under "/": the viewer's sessions
 * list, live view, recording player, approvals and blast radius.
 *
 * The files are embedded into the binary at build time (web/embed.cmake
 * turns each file of web/ into a C array of the generated
 * web-files.c), so serving them needs no file system: a request names a
 * file of the embedded table exactly or gets nothing from here, and no
 * path can reach anything else.
 *
 * The pages are static and public (they hold no data); everything they
 * show comes from the API with the viewer's token, which the pages keep in
 * sessionStorage and send as a header (or WebSocket subprotocol), never in
 * a URL.
 */
#ifndef DG_WEB_PRIV_H
#define DG_WEB_PRIV_H

#include <stddef.h>

/* One embedded file: name without the leading '/' ("index.html"). */
struct dg_web_file {
	const char *name;
	const unsigned char *data;
	size_t len;
	const char *content_type;
};

/* The generated table (web-files.c in the build directory). */
extern const struct dg_web_file dg_web_files[];
extern const size_t dg_web_n_files;

/* The security headers every page is served with. No inline script or
 * style runs (script-src and style-src fall back to 'self'); images may
 * be blob: URLs (frames fetched with the token); the pages connect only
 * to their own origin's API and WebSockets; they cannot be framed. */
#define DG_WEB_CSP                                                                           \
	"default-src 'self'; img-src 'self' blob:; connect-src 'self' ws: wss:; "            \
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/* The favicon the pages link to (<link rel="icon">), served at
 * DG_WEB_FAVICON_PATH too: browsers and other clients ask for that path on
 * their own, and without it every page's visit logged a 401. */
#define DG_WEB_FAVICON "favicon.svg"
#define DG_WEB_FAVICON_PATH "/favicon.ico"

/* The file a GET of path serves: "/" is index.html, DG_WEB_FAVICON_PATH
 * the favicon (DG_WEB_FAVICON, with its own image type), "/NAME" the
 * embedded file called exactly NAME. Anything else (a query string is not
 * part of path, an unknown name, a name with a slash, "..", an empty name):
 * NULL. path NULL: NULL. */
const struct dg_web_file *dg_web_find(const char *path);

struct conn;
/* Answers the HTTP request of c with f and the security headers. Returns
 * what the lws HTTP callback must return (0, or -1 to close). */
int dg_web_reply(struct conn *c, const struct dg_web_file *f);

#endif
