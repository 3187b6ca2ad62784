/* Internals the CDP firewall's two files share (desktop/worker/: cdp-fw.c,
 * cdp-fw-event.c); cdp-fw-priv.h is the contract the worker and the tests
 * see, and struct dg_cdpfw stays opaque to them.
 *
 *   cdp-fw.c        the owner's messages: clients, their commands, the
 *                   decisions and the replies
 *   cdp-fw-event.c  Chromium's events: which client's session each is on,
 *                   the sessions clients gain and lose
 */
#ifndef DG_WORKER_CDP_FW_INT_PRIV_H
#define DG_WORKER_CDP_FW_INT_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "desktop/proto/proto.h"
#include "desktop/worker/cdp-classify-priv.h"
#include "desktop/worker/cdp-fw-priv.h"

enum cmd_state { CMD_FREE, CMD_DECIDING, CMD_ALLOWED, CMD_SENT };

struct ticket;

/* A client's command, from its arrival to Chromium's reply. */
struct cmd {
	enum cmd_state state;
	uint64_t req;                       /* its DECIDE number */
	uint64_t seq;                       /* arrival order within the client */
	json_int_t id;                      /* the client's id */
	char session[DG_CDP_ID_MAX + 1];    /* the session the client named; "" none */
	char method[DG_CDP_METHOD_MAX + 1];
	json_t *params;                     /* until sent; NULL: none */
	size_t bytes, nodes;                /* what it holds, until sent */
	uint64_t ticket;                    /* CMD_SENT: its ticket's number */
	char *key;                          /* CMD_DECIDING: the command as asked (malloc'd),
					     * kept for the verdict cache; NULL when longer
					     * than DG_CDPFW_CACHE_KEY_MAX */
	size_t key_len;
};

/* A verdict the owner let the firewall apply again (DG_MSG_CDP_VERDICT's
 * cache): the command's bytes as they were asked, compared whole. */
struct cached {
	char *key;                          /* malloc'd; NULL: a free entry */
	size_t len;
	uint64_t used;                      /* the cache's clock when last hit (LRU) */
};

/* A session a client owns (besides its browser session). */
struct owned {
	char id[DG_CDP_ID_MAX + 1];         /* "" free */
	char parent[DG_CDP_ID_MAX + 1];     /* the session it was announced on */
};

/* A message that came before the client's browser session. */
struct queued {
	uint8_t *data;
	size_t len;
};

struct client {
	bool used;
	/* Closed, its browser session's detach sent and not yet confirmed
	 * (Target.detachedFromTarget at the root): browser and sessions are
	 * kept so that the events still on their way for them are dropped
	 * rather than taken for nobody's (the guard's). The slot is free for
	 * a new client all the same, last. */
	bool closing;
	uint32_t num;                        /* the owner's number for it */
	uint64_t gen;                        /* this use of the slot */
	char browser[DG_CDP_ID_MAX + 1];     /* its browser session; "" while attaching */
	struct queued queue[DG_CDPFW_QUEUE_MAX];
	int n_queued;
	struct cmd cmds[DG_CDPFW_PENDING_MAX];
	int n_cmds;
	uint64_t next_seq, sent_seq;
	size_t held_bytes, held_nodes;       /* queue and commands awaiting verdicts */
	struct owned sessions[DG_CDPFW_SESSIONS_MAX];
	int n_sessions;
};

/* The completion context of a command the firewall sent Chromium: an
 * attach (cmd NULL) or a client's command. fw NULL: the firewall is gone
 * (dg_cdpfw_free), and the ticket is in no list. */
struct ticket {
	struct dg_cdpfw *fw;
	struct ticket *prev, *next;
	int client;
	uint64_t gen;                        /* the client slot's use */
	struct cmd *cmd;
	uint64_t no;
};

struct dg_cdpfw {
	struct dg_cdp *cdp;
	int ctl;
	struct client clients[DG_CDPFW_CLIENTS_MAX];
	int n_attaching;                     /* browser sessions asked for, not answered */
	struct ticket *tickets;              /* every ticket not completed */
	struct dg_cdp_view view;             /* the classifier maps points with it */
	uint64_t next_req, next_gen, next_ticket;
	struct cached cache[DG_CDPFW_CACHE_MAX];
	uint64_t cache_clock;
	uint64_t sent_first, sent_last;      /* commands sent since the last frame taken */
	bool opened;                         /* a client attached since then */
	struct dg_cdpfw_stats st;
};

/* Sends the client one message (compact JSON; j consumed). */
void dg_cdpfw_to_client(struct dg_cdpfw *fw, const struct client *cl, json_t *j);

/* Drops the client: the owner is told why (and closes it); everything of
 * the client goes, its browser session detached. */
void dg_cdpfw_drop(struct dg_cdpfw *fw, struct client *cl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Whether session is one of the client's: its browser session or one it
 * owns. */
bool dg_cdpfw_owns(const struct client *cl, const char *session);

#endif
