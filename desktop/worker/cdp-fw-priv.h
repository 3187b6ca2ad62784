/* cdp-fw: the CDP firewall's routing, in the worker (docs/cdp.md, "The
 * firewall").
 *
 * The owner relays each CDP client's messages as bytes (DG_MSG_CDP_OPEN,
 * _IN, _CLOSE: desktop/proto/proto.h); the firewall parses them, asks the
 * owner to decide every command (DG_MSG_CDP_DECIDE, answered by
 * DG_MSG_CDP_VERDICT), sends the allowed ones to Chromium through the
 * worker's DevTools client (dg_cdp_send_raw, with ids of its own) and
 * hands the client its replies and the events of its sessions
 * (DG_MSG_CDP_OUT). A client that breaks the protocol is dropped
 * (DG_MSG_CDP_DROP, with why): the owner closes it.
 *
 * Sessions. Each client gets a browser session of its own
 * (Target.attachToBrowserTarget on the root session, sent at OPEN); its
 * commands without a sessionId run there, so its Target.setAutoAttach,
 * setDiscoverTargets or Fetch.enable never touch the guard's (Chromium
 * keeps them per session). A session announced (Target.attachedToTarget)
 * on one of a client's sessions is that client's; one it is told detached
 * is forgotten. Everything else is nobody's: the root session and the
 * sessions of the guard and of the worker's own page, and the firewall
 * never lets a client name them nor sees their events go to one.
 * Withheld too (detached at once, never announced to the client): a
 * session past DG_CDPFW_SESSIONS_MAX, and one on a browser_ui target (the
 * browser's own chrome:// pages, whose bindings drive the browser).
 *
 * Client messages, every byte hostile:
 *  - one JSON object of at most DG_CDP_MSG_MAX bytes and DG_CDP_NODES_MAX
 *    values, keys "id" (integer 0..2^53), "method" ("Domain.method", as
 *    dg_cdp_method_ok), "params" (object, optional), "sessionId" (string,
 *    optional) and nothing else, no duplicate keys, no NUL in a string:
 *    anything else drops the client ("malformed CDP message: why");
 *  - a sessionId the client does not own: answered as Chromium answers an
 *    unknown one, {"id", "error": {"code": -32001, "message": "Session with
 *    given id not found."}} without a sessionId (measured, Chromium 156),
 *    and not decided;
 *  - at most DG_CDPFW_PENDING_MAX commands of a client wait for a verdict
 *    or a reply, holding at most DG_CDPFW_HELD_BYTES_MAX bytes and
 *    DG_CDPFW_HELD_NODES_MAX JSON values while they wait for a verdict:
 *    past that a command is answered -32000 "deskgate: too many commands
 *    in flight";
 *  - refused before deciding (dg_cdp_classify's refusals and the
 *    parameters it finds malformed, Target.exposeDevToolsProtocol): -32000
 *    with the reason; denied by the owner: -32000 "deskgate: denied by
 *    RULE: REASON". Answers on a session the client named carry its
 *    "sessionId"; the connection stays usable.
 * Allowed commands go to Chromium in the order the client sent them (a
 * verdict that comes early waits for those before it), on the session
 * the client named or its browser session, and the reply goes back with
 * the client's own id, its "result" or "error" exactly as Chromium sent
 * it.
 *
 * Until its browser session exists a client's messages wait, at most
 * DG_CDPFW_QUEUE_MAX of them and DG_CDPFW_HELD_BYTES_MAX bytes; more drops
 * it. A client closed (CLOSE) or dropped loses its commands and replies;
 * its browser session is detached, which detaches every session it
 * opened under it (measured: they answer -32001 after); events still on
 * their way for its sessions are dropped until the browser confirms the
 * detach, never taken for the guard's.
 *
 * Used by the worker's one thread only. Sending to the owner blocks like
 * the worker's other messages; a failed send is counted (the owner is
 * gone, which the worker's next read of the channel finds).
 */
#ifndef DG_WORKER_CDP_FW_PRIV_H
#define DG_WORKER_CDP_FW_PRIV_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "desktop/worker/cdp-priv.h"

#define DG_CDPFW_CLIENTS_MAX 4     /* CDP clients at once (the gateway's DG_GW_CDP_CLIENTS_MAX) */
#define DG_CDPFW_QUEUE_MAX 64      /* messages of a client waiting for its browser session */
#define DG_CDPFW_PENDING_MAX 64    /* commands of a client waiting for a verdict or a reply */
#define DG_CDPFW_SESSIONS_MAX 256  /* sessions a client owns besides its browser session */
/* What a client's messages may hold in the worker while they wait (for
 * the browser session, for verdicts): their bytes, and their JSON values
 * (each costs jansson 40-80 bytes: 64 commands of DG_CDP_NODES_MAX values
 * would be a gigabyte). */
#define DG_CDPFW_HELD_BYTES_MAX (32u * 1024 * 1024)
#define DG_CDPFW_HELD_NODES_MAX (2 * DG_CDP_NODES_MAX)
/* The verdict cache (docs/cdp.md, "The verdict cache"): commands the owner
 * allowed with "cache" (their decision depends on nothing but their
 * bytes), allowed again without asking, the least recently used one
 * forgotten first. A command longer than the key bound is always asked
 * (Playwright's injected scripts: once per page). 256 x 16 KiB bounds it
 * at 4 MiB. */
#define DG_CDPFW_CACHE_MAX 256
#define DG_CDPFW_CACHE_KEY_MAX (16u * 1024)

struct dg_cdpfw_stats {
	uint64_t opened, closed, dropped; /* clients: OPEN, CLOSE, dropped by the worker */
	uint64_t refused_clients;   /* OPEN past DG_CDPFW_CLIENTS_MAX, or without a browser */
	uint64_t commands;          /* well-formed commands */
	uint64_t decided;           /* DECIDE sent */
	uint64_t cached;            /* allowed under a cached verdict (NOTE sent) */
	uint64_t allowed, denied;   /* verdicts */
	uint64_t refused;           /* answered before deciding (classify, too many) */
	uint64_t not_found;         /* answered -32001: a session the client does not own */
	uint64_t replies;           /* Chromium's replies passed on */
	uint64_t events;            /* events passed on */
	uint64_t stale_verdicts;    /* verdicts for no command waiting (ignored) */
	uint64_t unknown_clients;   /* IN/CLOSE for a client not open (ignored) */
	uint64_t sessions_withheld; /* detached at once: too many, or browser_ui */
	uint64_t send_errors;       /* messages the owner could not be sent */
};

struct dg_cdpfw;

/* A firewall that sends to Chromium through c (not owned; NULL for a
 * session without a browser, whose clients are refused at OPEN) and to the
 * owner on ctl (the worker's channel). NULL when out of memory. */
struct dg_cdpfw *dg_cdpfw_new(struct dg_cdp *c, int ctl);

/* Frees the firewall. Commands still waiting for Chromium's replies stay
 * in c, whose callbacks then do nothing; call it before or after
 * dg_cdp_free. NULL is fine. */
void dg_cdpfw_free(struct dg_cdpfw *fw);

/* Whether type is one the owner sends the firewall: DG_MSG_CDP_OPEN,
 * _CLOSE, _IN, _VERDICT. */
bool dg_cdpfw_handles(uint32_t type);

/* One message from the owner (type as dg_cdpfw_handles, data its payload).
 * Returns 0 (a client's bad message is the client's: dropped, not an
 * error), or -EPROTO when the owner broke the protocol: a message too
 * short for its client number, OPEN or CLOSE with bytes after it, OPEN of
 * a client already open, a malformed VERDICT (err says which). */
int dg_cdpfw_message(struct dg_cdpfw *fw, uint32_t type, const uint8_t *data, size_t len,
		     struct dg_err *err);

/* Every DevTools event, first (the worker's event callback: method,
 * session_id NULL at the root, params an object). Returns true when it was
 * a client's (on one of its sessions, or the root's announcement of a
 * client's browser session): handled, and nobody else's business (the
 * guard and the page logs must not see it, their sessions are others);
 * false when it is not a client's: the firewall did nothing with it. */
bool dg_cdpfw_event(struct dg_cdpfw *fw, const char *method, const char *session, json_t *params);

/* The geometry the classifier (cdp-classify-priv.h) maps a command's
 * viewport points to the screen with. Until a viewport is set (vp_w, vp_h
 * 0, as at start) every command with a point is refused. */
struct dg_cdp_view;
void dg_cdpfw_set_view(struct dg_cdpfw *fw, const struct dg_cdp_view *view);

/* Clients open now, and the counters. */
int dg_cdpfw_n_clients(const struct dg_cdpfw *fw);

/* What a frame of the screen for the recording would follow (worker.c,
 * DG_MSG_CDP_FRAME): the commands sent to Chromium since the last
 * dg_cdpfw_frame_taken, their DECIDE numbers first..last (0, 0: none),
 * and whether a client attached since. false: neither. */
bool dg_cdpfw_frame_due(const struct dg_cdpfw *fw, uint64_t *first, uint64_t *last,
			bool *opened);
void dg_cdpfw_frame_taken(struct dg_cdpfw *fw);
void dg_cdpfw_stats(const struct dg_cdpfw *fw, struct dg_cdpfw_stats *s);

#endif
