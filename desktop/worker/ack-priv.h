/* ack: typing into the browser that the page acknowledges (internal to
 * desktop/worker/; the worker's `type` action: in a browser session as
 * below, without a browser (cdp NULL) typed at once and done from
 * dg_ack_advance, for the worker to sync with the X server).
 *
 * Why: Xvnc takes thousands of key events at once, but Chromium turns them
 * into page input at a few hundred characters a second; sent in one burst,
 * a 3,000-character text was answered with 30 of them in the page, the
 * rest arriving seconds later. So the text is typed in chunks of at most
 * DG_ACK_CHUNK characters, and each chunk is sent only once the page has
 * received every key of the ones before the last (at most two chunks wait
 * in the browser at any time): a keyup listener in an isolated
 * world of the page's main frame (DG_ACK_WORLD, invisible to the page's
 * scripts) counts the keys that reach the page, and a promise evaluated
 * there resolves when the count reaches what was sent. The action is done
 * when the page has received the last key.
 *
 * Counted are the keyup events of keys that type text, as the browser
 * delivers them (not events a script dispatched): modifier keys and
 * keys released with Control held (the worker's priming of keysyms outside
 * the keymap, see prime() in worker.c) are not, so what the worker sends
 * around the text does not change the count.
 *
 * Characters outside the US keymap (é, 漢, 😀) are not typed as keys:
 * Xvnc maps each onto a spare keycode as it is pressed, and Chromium,
 * reading its keymap late, dropped about two thirds of a Chinese text.
 * They are committed as an input method commits them (Input.insertText,
 * up to DG_ACK_INSERT_MAX at once: the page sees beforeinput and input,
 * no keydown, as with a real IME), each run only after the page has every
 * key typed before it, and the next keys only after the browser has
 * answered that the page handled the insertion: the text arrives in order.
 *
 * Bound: a type action of n characters waits at most DG_ACK_BASE_MS +
 * n * DG_ACK_PER_KEY_MS. When the page has not received the keys sent so
 * far by then, typing stops (the characters not sent yet are never typed)
 * and the action completes with an error saying how many characters were
 * sent and how many keys the page had received.
 *
 * Not counted (typed in one burst, as before, then settled): when the page
 * has no focus (the keys go to the browser's own window: the address bar)
 * or the focus is inside a frame of the page (its keys do not reach the
 * main frame's listener), when the isolated world cannot be set up, and
 * from the moment the page goes away mid-text (Return submitted a form:
 * the rest goes to the next page unacknowledged).
 *
 * A hostile page can delay its own keys or swallow their events
 * (stopImmediatePropagation in an earlier listener): the action then ends
 * at its bound with the error; it cannot make the worker wait longer.
 */
#ifndef DG_WORKER_ACK_PRIV_H
#define DG_WORKER_ACK_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "desktop/worker/cdp-priv.h"

#define DG_ACK_CHUNK 64             /* characters typed before waiting for the page */
#define DG_ACK_BASE_MS 2000         /* a type action's bound: BASE + PER_KEY a character */
#define DG_ACK_PER_KEY_MS 20
#define DG_ACK_WORLD "deskgate-keys" /* the isolated world's name */
#define DG_ACK_INSERT_MAX 256       /* characters outside the keymap in one insertion */

/* Types n keysyms (press and release each, priming included). */
typedef void (*dg_ack_keys_fn)(void *arg, const uint32_t *ks, size_t n);
/* The action is over: error NULL (every key reached the page, or typing
 * was not counted), or why not (the bound). Called once per dg_ack_type
 * that returned 0, never inside that call. */
typedef void (*dg_ack_done_fn)(void *arg, const char *error);

/* One typing at a time; lives as long as the worker (its commands' late
 * replies find it). Zero-initialised is idle. */
struct dg_ack {
	struct dg_cdp *cdp;
	uint64_t gen;               /* bumped per typing: late replies are ignored */
	bool busy;
	bool counting;              /* the page acknowledges its keys */
	int ctx;                    /* the isolated world's context id; 0: none yet */
	char ctx_session[DG_CDP_ID_MAX + 1]; /* ... in this page session */
	uint32_t *ks;               /* the text's keysyms (malloc'd) */
	size_t n, next;             /* how many; the next one to send */
	size_t inserting;           /* characters in the insertion in flight */
	long long expect;           /* the page's count once it has every key sent */
	long long want;             /* ... that the wait in flight waits for */
	long long received;         /* the page's count, last read */
	long long t0, deadline;     /* ms */
	dg_ack_keys_fn keys;
	dg_ack_done_fn done;
	void *arg;
	char error[DG_ERR_MAX];
};

/* Starts typing text (len bytes of UTF-8, as in a type action) on the
 * current page of cdp. Returns 0 (done will be called), or a negative
 * errno with err and done never called: -EINVAL the text does not convert
 * to keysyms, -EBUSY a typing is in progress, -ENOMEM. */
int dg_ack_type(struct dg_ack *a, struct dg_cdp *cdp, const char *text, size_t len,
		dg_ack_keys_fn keys, dg_ack_done_fn done, void *arg, struct dg_err *err);

/* The worker's poll timeout while typing: ms until the bound; at the bound
 * the typing ends (done runs) and 0 is returned. -1 when idle. */
int dg_ack_advance(struct dg_ack *a);

/* Frees what a finished typing holds. */
void dg_ack_free(struct dg_ack *a);

#endif
