/* input: actions as RFB input events (input.c), for the worker alone.
 *
 * The worker owns the RFB connection and its reading; input.c only sends
 * pointer and key events on it, and asks the worker (sync) when it needs
 * Xvnc to have processed what was sent so far. Single-threaded, like the
 * worker.
 */
#ifndef DG_WORKER_INPUT_PRIV_H
#define DG_WORKER_INPUT_PRIV_H

#include <rfb/rfbclient.h>
#include <stdbool.h>
#include <stdint.h>

#include "actions/actions.h"
#include "desktop/worker/worker.h"

struct dg_input {
	rfbClient *vnc;          /* the worker's; input.c only sends on it */
	bool prime;              /* browser: prime keysyms outside the keymap */
	int buttons;             /* RFB button mask held now */
	int px, py;              /* pointer position */
	uint64_t presses;        /* button changes of buttons 1-3 sent, ever (gate.c counts them in the page) */
	uint32_t primed[DG_WORKER_PRIMED_MAX]; /* keysyms Xvnc has mapped for us */
	int n_primed;
	/* Returns once Xvnc has processed every event sent before it, or after
	 * DG_WORKER_SYNC_MAX_MS (the worker's: it reads the RFB socket). */
	void (*sync)(void *arg);
	void *sync_arg;
	bool failed;             /* a send failed: the desktop is gone */
};

/* Performs the input of a (click, move, drag, mouse_down, mouse_up, scroll,
 * type, key; the other types are not input and are refused with -EINVAL).
 * Returns 0; -EPIPE when an event could not be sent (the desktop is gone:
 * in->failed is set and nothing more is sent); -EINVAL, -ENOMEM, with err,
 * for a text that cannot be typed. */
int dg_input_run(struct dg_input *in, const struct dg_action *a, struct dg_err *err);

/* Types n keysyms (a text's, or a chunk of one: the worker paces a
 * browser's typing, ack.c): primed when needed, a character of a Shift
 * level with Shift_L held, nothing left held. 0, or -EPIPE when an event
 * could not be sent. */
int dg_input_type_keys(struct dg_input *in, const uint32_t *ks, size_t n);

/* Presses (down) or releases chord c: hold_key's two halves. Returns 0 or
 * -EPIPE with err, as dg_input_run. */
int dg_input_chord(struct dg_input *in, const struct dg_chord *c, bool down, struct dg_err *err);

#endif
