/* input: actions as RFB input events (see input-priv.h).
 *
 * Pointer and key events go to Xvnc as RFB messages: pointer events carry
 * the whole button mask, key events a keysym that Xvnc turns into a keycode
 * of its keymap.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "desktop/worker/input-priv.h"

/* RFB button-mask bits of the wheel: 4 up, 5 down, 6 left, 7 right. */
#define WHEEL_UP 4
#define WHEEL_DOWN 5
#define WHEEL_LEFT 6
#define WHEEL_RIGHT 7

static void pointer(struct dg_input *in, int x, int y, int mask)
{
	in->px = x;
	in->py = y;
	in->presses += (uint64_t)__builtin_popcount((unsigned)(in->buttons ^ mask) & 7u);
	in->buttons = mask;
	if (!in->failed && !SendPointerEvent(in->vnc, x, y, mask))
		in->failed = true;
}

static void key(struct dg_input *in, uint32_t keysym, bool down)
{
	if (!in->failed && !SendKeyEvent(in->vnc, keysym, down ? TRUE : FALSE))
		in->failed = true;
}

static int button_bit(enum dg_button b)
{
	return 1 << ((int)b - 1);
}

static void modifiers(struct dg_input *in, unsigned mods, bool down)
{
	uint32_t ks[DG_MOD_COUNT];
	int n = dg_modifier_keysyms(mods, ks);
	for (int i = 0; i < n; i++)
		key(in, ks[down ? i : n - 1 - i], down);
}

/* What a chord sends, as xdotool's key press yields it on the US layout
 * (see "the US layout's Shift level" in actions/actions.h): the chord's
 * keys in the order written, each key but a modifier at the Shift level in
 * effect when it is pressed: with Shift held, the key's Shift keysym
 * (shift+a sends Shift_L, A); a keysym of the Shift level without Shift
 * held gets Shift_L pressed before it (ctrl+A sends Control_L, Shift_L, A),
 * and the keys after it are at that level too. So Xvnc never has to fake
 * a Shift level, which it does with Caps Lock. The canonical action keeps
 * the chord as the agent wrote it. */
struct sent_chord {
	uint32_t keysyms[DG_CHORD_MAX + 1]; /* at most one Shift_L added */
	int n;
};

static void plan_chord(const struct dg_chord *c, struct sent_chord *out)
{
	bool shift = false;
	out->n = 0;
	for (int i = 0; i < c->n; i++) {
		uint32_t ks = c->keysyms[i], other;
		if (dg_keysym_is_shift(ks)) {
			shift = true;
		} else if (!dg_keysym_is_modifier(ks)) {
			if (shift && dg_keysym_us_shifted(ks, &other) == 0) {
				ks = other;
			} else if (!shift && dg_keysym_us_unshifted(ks, &other) == 0) {
				out->keysyms[out->n++] = DG_KEYSYM_SHIFT_L;
				shift = true;
			}
		}
		out->keysyms[out->n++] = ks;
	}
}

static void chord(struct dg_input *in, const struct dg_chord *c, bool down)
{
	struct sent_chord s;
	plan_chord(c, &s);
	for (int i = 0; i < s.n; i++)
		key(in, s.keysyms[down ? i : s.n - 1 - i], down);
}

/* Lets time pass between the clicks of a multi-click: applications drop
 * a press whose server timestamp equals the previous one's. Once Xvnc has
 * processed the first click (sync), the pause gives the next press a later
 * timestamp even when Xvnc was busy. The worker blocks for these few
 * milliseconds; it serves one session. */
static void gap(struct dg_input *in, int ms)
{
	in->sync(in->sync_arg);
	struct timespec ts = {0, (long)ms * 1000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void click(struct dg_input *in, const struct dg_action *a)
{
	int bit = button_bit(a->button);
	modifiers(in, a->modifiers, true);
	pointer(in, a->x, a->y, in->buttons);
	for (int i = 0; i < a->count; i++) {
		if (i > 0)
			gap(in, DG_WORKER_CLICK_GAP_MS);
		pointer(in, a->x, a->y, in->buttons | bit);
		pointer(in, a->x, a->y, in->buttons & ~bit);
	}
	modifiers(in, a->modifiers, false);
}

static void drag(struct dg_input *in, const struct dg_action *a)
{
	int bit = button_bit(a->button);
	modifiers(in, a->modifiers, true);
	pointer(in, a->path[0][0], a->path[0][1], in->buttons);
	pointer(in, a->path[0][0], a->path[0][1], in->buttons | bit);
	/* Intermediate motion so the application sees a drag, not a jump. */
	for (int i = 1; i < a->n_path; i++) {
		int x0 = a->path[i - 1][0], y0 = a->path[i - 1][1];
		int x1 = a->path[i][0], y1 = a->path[i][1];
		int steps = abs(x1 - x0) > abs(y1 - y0) ? abs(x1 - x0) : abs(y1 - y0);
		steps = steps / 16 + 1;
		for (int s = 1; s <= steps; s++)
			pointer(in, x0 + (x1 - x0) * s / steps, y0 + (y1 - y0) * s / steps,
				in->buttons);
	}
	int last = a->n_path - 1;
	pointer(in, a->path[last][0], a->path[last][1], in->buttons & ~bit);
	modifiers(in, a->modifiers, false);
}

static void wheel(struct dg_input *in, int button, int notches)
{
	int bit = 1 << (button - 1);
	for (int i = 0; i < notches; i++) {
		pointer(in, in->px, in->py, in->buttons | bit);
		pointer(in, in->px, in->py, in->buttons & ~bit);
	}
}

static void scroll(struct dg_input *in, const struct dg_action *a)
{
	modifiers(in, a->modifiers, true);
	pointer(in, a->x, a->y, in->buttons);
	wheel(in, a->dy > 0 ? WHEEL_DOWN : WHEEL_UP, abs(a->dy));
	wheel(in, a->dx > 0 ? WHEEL_RIGHT : WHEEL_LEFT, abs(a->dx));
	modifiers(in, a->modifiers, false);
}

/* Xvnc maps a keysym that is not in its keymap (é, 漢, 😀) onto a spare
 * keycode when it is first pressed, and sends the press right after the
 * keymap change. Chromium can read that first press with its old keymap and
 * drop the character. So, in the browser, the first use of such a keysym is
 * primed: pressed with Control held (which inserts no text), then a pause
 * for the browser to take the new keymap, then typed for real. xterm reads
 * the keymap change before the key and needs none of this. */
static bool needs_priming(struct dg_input *in, uint32_t ks)
{
	if (!in->prime || dg_keysym_in_us_keymap(ks))
		return false;
	for (int i = 0; i < in->n_primed; i++) {
		if (in->primed[i] == ks)
			return false;
	}
	return true;
}

static void prime(struct dg_input *in, const uint32_t *ks, size_t n)
{
	bool any = false;
	for (size_t i = 0; i < n; i++) {
		if (!needs_priming(in, ks[i]))
			continue;
		key(in, DG_KEYSYM_CONTROL_L, true);
		key(in, ks[i], true);
		key(in, ks[i], false);
		key(in, DG_KEYSYM_CONTROL_L, false);
		if (in->n_primed < DG_WORKER_PRIMED_MAX)
			in->primed[in->n_primed++] = ks[i];
		else
			in->primed[ks[i] % DG_WORKER_PRIMED_MAX] = ks[i];
		any = true;
	}
	if (any)
		gap(in, DG_WORKER_PRIME_PAUSE_MS);
}

int dg_input_type_keys(struct dg_input *in, const uint32_t *ks, size_t n)
{
	prime(in, ks, n);
	/* A character of a key's Shift level (capitals, !, ?, ...) is typed
	 * with Shift_L held, as a US keyboard types it, never left to Xvnc
	 * (which would press Caps Lock); Shift is held across a run of such
	 * characters and released before any other key (Shift+Return is not
	 * Return to every application) and at the end. */
	bool shift = false;
	for (size_t i = 0; i < n; i++) {
		uint32_t base;
		bool up = dg_keysym_us_unshifted(ks[i], &base) == 0;
		if (up != shift) {
			key(in, DG_KEYSYM_SHIFT_L, up);
			shift = up;
		}
		key(in, ks[i], true);
		key(in, ks[i], false);
	}
	if (shift)
		key(in, DG_KEYSYM_SHIFT_L, false);
	return in->failed ? -EPIPE : 0;
}

static int type_text(struct dg_input *in, const struct dg_action *a, struct dg_err *err)
{
	size_t max = a->text_len + 1, n = 0;
	uint32_t *ks = calloc(max, sizeof(*ks));
	if (!ks)
		return dg_err_set(err, -ENOMEM, "out of memory");
	int r = dg_text_to_keysyms(a->text, a->text_len, ks, max, &n, err);
	if (r == 0)
		dg_input_type_keys(in, ks, n);
	free(ks);
	return r;
}

static int sent(struct dg_input *in, struct dg_err *err)
{
	if (in->failed)
		return dg_err_set(err, -EPIPE, "sending an input event failed: the desktop is gone");
	return 0;
}

int dg_input_run(struct dg_input *in, const struct dg_action *a, struct dg_err *err)
{
	int r = 0;
	switch (a->type) {
	case DG_ACTION_CLICK:
		click(in, a);
		break;
	case DG_ACTION_MOVE:
		modifiers(in, a->modifiers, true);
		pointer(in, a->x, a->y, in->buttons);
		modifiers(in, a->modifiers, false);
		break;
	case DG_ACTION_DRAG:
		drag(in, a);
		break;
	case DG_ACTION_MOUSE_DOWN:
	case DG_ACTION_MOUSE_UP: {
		int bit = button_bit(a->button);
		int x = a->has_xy ? a->x : in->px, y = a->has_xy ? a->y : in->py;
		pointer(in, x, y,
			a->type == DG_ACTION_MOUSE_DOWN ? in->buttons | bit : in->buttons & ~bit);
		break;
	}
	case DG_ACTION_SCROLL:
		scroll(in, a);
		break;
	case DG_ACTION_TYPE:
		r = type_text(in, a, err);
		break;
	case DG_ACTION_KEY:
		for (int i = 0; i < a->n_chords; i++) {
			chord(in, &a->chords[i], true);
			chord(in, &a->chords[i], false);
		}
		break;
	default:
		return dg_err_set(err, -EINVAL, "%s is no input action",
				  dg_action_type_name(a->type));
	}
	return r ? r : sent(in, err);
}

int dg_input_chord(struct dg_input *in, const struct dg_chord *c, bool down, struct dg_err *err)
{
	chord(in, c, down);
	return sent(in, err);
}
