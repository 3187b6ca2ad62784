/* cdp-classify: what a CDP client's command amounts to, for the policy
 * (internal to desktop/worker/; docs/cdp.md, "Decisions").
 *
 * The firewall (cdp-fw.c) parses every command a CDP client sends, checks
 * its envelope (params absent or an object) and calls dg_cdp_classify:
 * the result is what it asks the owner in a DG_MSG_CDP_DECIDE besides
 * req, client, method and session (struct dg_cdp_decide: action, code,
 * url, params), or a refusal it answers the client with itself. Pure: no
 * I/O, no global mutable state.
 *
 * Every parameter is hostile (a client drives pages an attacker shapes):
 * types are checked, strings bounded (and refused with NUL, which a C
 * string down the line would silently cut), numbers range-checked before
 * any conversion, arrays counted before they are walked. A parameter the
 * decision does not depend on is not looked at: Chromium checks it.
 *
 * The mapping (docs/cdp.md's table; "nothing" below means every field of
 * the result NULL: the method rules alone decide):
 *
 *   Page.navigate {url}, Target.createTarget {url}
 *       navigate; url "about:blank" (and "" for createTarget): nothing
 *   Page.reload            reload; with scriptToEvaluateOnLoad also code
 *   Page.navigateToHistoryEntry   back (the policy treats back and forward
 *       alike in practice, and the entry's direction is not in the command)
 *   Input.dispatchMouseEvent, Input.emulateTouchFromMouseEvent
 *       {type, x, y, button, deltaX, deltaY, modifiers}: mousePressed ->
 *       mouse_down, mouseReleased -> mouse_up, mouseMoved -> move,
 *       mouseWheel -> scroll (deltas in notches of DG_CDP_NOTCH_PX CSS
 *       pixels, rounded, at least 1 when not 0, clamped to
 *       DG_ACTION_SCROLL_MAX; both 0: move)
 *   Input.dispatchTouchEvent {type, touchPoints}: touchStart/touchMove
 *       with one point: click there; with several (at most
 *       DG_CDP_TOUCH_POINTS_MAX): drag along them; touchEnd/touchCancel,
 *       or no points: nothing
 *   Input.dispatchDragEvent {x, y, data}: move at the point; data.files
 *       (a drop of files) also as DOM.setFileInputFiles's params
 *   Input.synthesizeTapGesture {x, y}: click; Input.synthesizePinchGesture
 *       {x, y}: move; Input.synthesizeScrollGesture {x, y, xDistance,
 *       yDistance}: scroll (positive distances scroll left and up)
 *   Input.insertText, Input.imeSetComposition {text}: type ("" nothing)
 *   Input.dispatchKeyEvent: see "Key events" below
 *   Runtime.evaluate, Runtime.compileScript, Debugger.evaluateOnCallFrame
 *       {expression}; Runtime.callFunctionOn {functionDeclaration};
 *       Page.addScriptToEvaluateOnNewDocument {source};
 *       Page.addScriptToEvaluateOnLoad, Debugger.setScriptSource
 *       {scriptSource}; Debugger.setBreakpoint, setBreakpointByUrl,
 *       setBreakpointOnFunctionCall {condition, when not ""}: code
 *   DOM.setFileInputFiles {files}: params {"files": [...]} (1 to
 *       DG_ACTION_PATHS_MAX paths, each as file_upload's paths: absolute,
 *       canonical, at most DG_ACTION_FILE_PATH_MAX bytes); the owner
 *       checks where they are
 *   Fetch.continueRequest {url}: url, when given
 *   Browser.setDownloadBehavior, Page.setDownloadBehavior {behavior}:
 *       params {"behavior": behavior} (the owner allows deny and default)
 *   Target.createBrowserContext {proxyServer}: params {"proxyServer":
 *       true} when it names a proxy, else nothing
 *   Target.attachToTarget without flatten true, Target.setAutoAttach with
 *       autoAttach true without flatten true, Target.sendMessageToTarget:
 *       refused (DG_CDP_REFUSE_FLATTEN, DG_CDP_REFUSE_FLAT)
 *   any other method: nothing
 *
 * Points. x, y are CSS pixels of the viewport (numbers); the screen point
 * is (vp_x + round(x), vp_y + round(y)), and a point whose rounded
 * coordinates are outside 0 <= x < vp_w, 0 <= y < vp_h, or that falls off
 * the screen, is refused (DG_CDP_REFUSE_POINT). Modifiers (CDP bits Alt 1,
 * Ctrl 2, Meta 4, Shift 8; other bits ignored) become the action's
 * "modifiers" where the schema has them (click, move, drag, scroll; not
 * mouse_down/mouse_up), Meta as "super": the browser's Meta key is the
 * Super key on X.
 *
 * Every action is put through dg_action_parse_obj for the view's screen
 * and given in its canonical form (dg_action_to_json), so the owner gets
 * exactly what it would decide for an agent; what the parser refuses
 * (text with control characters, a URL with them) is -EINVAL here.
 *
 * params, for the recording (and the owner's checks above): a small
 * summary of the command, bounded to a few KiB but for setFileInputFiles'
 * files (at most DG_ACTION_PATHS_MAX x DG_ACTION_FILE_PATH_MAX bytes, kept
 * whole: the owner checks them): the URL (cut at DG_CDP_KEPT_MAX bytes,
 * with "url_bytes" then), the point as given, the event's type, button,
 * deltas and modifiers, the key of a key action, a text's length
 * ("text_bytes"), never the text, nor the key or code of a key event that
 * types (which would be the text again), a script's length ("code_bytes")
 * and its first DG_CDP_CODE_HEAD bytes ("code_head"), the editing commands
 * of a key event. NULL when the result is nothing.
 */
#ifndef DG_WORKER_CDP_CLASSIFY_PRIV_H
#define DG_WORKER_CDP_CLASSIFY_PRIV_H

#include <stdint.h>

#include <jansson.h>

#include "actions/actions.h"
#include "base/base.h"
#include "desktop/proto/proto.h"

#define DG_CDP_TOUCH_POINTS_MAX 16 /* points of one touch event */
#define DG_CDP_NOTCH_PX 100        /* CSS pixels of wheel delta a notch */
#define DG_CDP_CODE_HEAD 200       /* bytes of a script the recording keeps */
#define DG_CDP_KEPT_MAX 1024       /* bytes of a URL or key name the recording keeps */
#define DG_CDP_WORD_MAX 64         /* bytes of an event type, button, behavior, key name */
#define DG_CDP_COMMANDS_MAX 16     /* editing commands of one key event */

#define DG_CDP_REFUSE_POINT "deskgate: the point is outside the viewport"
#define DG_CDP_REFUSE_FLATTEN "deskgate: only flattened sessions are served (flatten: true)"
#define DG_CDP_REFUSE_FLAT "deskgate: only flattened sessions are served"

/* The page's geometry the classifier maps viewport points with: the
 * viewport's place and size on the screen (vp_w or vp_h 0: no viewport
 * known, every point is outside), and the screen's size (1 to
 * DG_ACTION_SCREEN_MAX each, else a command with a point is -EINVAL). */
struct dg_cdp_view {
	int vp_x, vp_y, vp_w, vp_h;
	int screen_w, screen_h;
};

/* What to ask the owner about one command (the fields of a
 * DG_MSG_CDP_DECIDE besides req/client/method/session), or that the
 * worker refuses it itself. Owns its references (dg_cdp_class_free). */
struct dg_cdp_class {
	json_t *action;     /* a canonical action in screen coordinates, or NULL */
	json_t *code;       /* a JSON string: the script it runs, or NULL */
	json_t *url;        /* a JSON string: the URL a request goes to, or NULL */
	json_t *params;     /* what the recording keeps of the parameters (an object), or NULL */
	const char *refuse; /* non-NULL: the worker answers the client with this error
			       itself (a static string); the rest is NULL */
};

/* Classifies one command. method: the client's method (any string);
 * params: NULL (absent) or an object; view: the page's geometry (may be
 * NULL when no page is known: a command with a point is then refused).
 * Returns 0 with *out filled (all NULL: decide the method alone),
 * -EINVAL when the parameters are malformed in a way the decision
 * depends on (err names the field: "Page.navigate.url: ..."; the caller
 * answers the client with a CDP error), or -ENOMEM. On error *out is all
 * NULL. */
int dg_cdp_classify(const char *method, const json_t *params, const struct dg_cdp_view *view,
		    struct dg_cdp_class *out, struct dg_err *err);

/* Drops what c holds and zeroes it; harmless on a zeroed one. */
void dg_cdp_class_free(struct dg_cdp_class *c);

/* Key events. Input.dispatchKeyEvent {type, key, code, text, modifiers,
 * windowsVirtualKeyCode, commands}:
 *  - keyUp: nothing; a modifier key's own press (Control, Shift, Alt,
 *    Meta...): nothing (it does nothing by itself; the chord it makes is
 *    decided with the key it modifies);
 *  - with Ctrl, Alt or Meta held and a key: key, the chord of the held
 *    modifiers and the key (Control_L, Shift_L, Alt_L, Super_L, then it);
 *  - otherwise with text: type the text;
 *  - otherwise a key: key (Shift_L first when Shift is held);
 *  - otherwise nothing.
 * The key is key (a DOM key value: a single character as that character,
 * a letter lower-case; Enter, Tab, Backspace, Escape, Delete, ArrowLeft...,
 * F1..F24, " " as space, and the other names of dg_cdp_dom_key), else
 * the key of code (KeyA, Digit1, or a key name), else of
 * windowsVirtualKeyCode. A key that is named but not known is -EINVAL.
 * Browsers match their shortcuts on windowsVirtualKeyCode, the page sees
 * key: when windowsVirtualKeyCode names a letter, digit, F key or named
 * key (Enter, Tab, arrows...) and the key (or the code, without a key) is
 * another key (at either Shift level: "!" is the key of 1), the command
 * is -EINVAL, so a shortcut cannot hide behind another key's name. */

/* The X keysym of a DOM key value (KeyboardEvent.key): 0 or -ENOENT. */
int dg_cdp_dom_key(const char *key, uint32_t *keysym);

#endif
