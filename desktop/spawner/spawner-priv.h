/* The spawner's request table with its privileged effects as a table of
 * functions (spawner.c): the real ones start jails, desktops, workers, the
 * egress proxy and exec runners, and look at upload paths in a desktop's
 * jail; a harness that cannot create jails
 * (tests/fuzz/fuzz_spawner.c) gives recording stubs and drives the same
 * dispatcher. Private to desktop/spawner/ (and that harness).
 */
#ifndef DG_SPAWNER_PRIV_H
#define DG_SPAWNER_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "desktop/spawner/spawner.h"

struct dg_spawner_fx {
	/* dg_seq_send */
	int (*send)(int fd, const char *data, size_t len, const int *fds, int nfds);
	/* dg_desktop_start, dg_desktop_destroy, dg_worker_start, dg_worker_stop */
	int (*desktop_start)(const struct dg_desktop_spec *spec, struct dg_desktop *d,
			     struct dg_err *err);
	void (*desktop_destroy)(struct dg_desktop *d);
	int (*worker_start)(struct dg_desktop_io *io, struct dg_worker *w, struct dg_err *err);
	void (*worker_stop)(struct dg_worker *w);
	/* Kills and reaps the proxy started earlier (previous > 0), then starts
	 * a new one (dg_egress_spawn). */
	int (*egress_spawn)(pid_t previous, struct dg_egress *e, struct dg_err *err);
	/* Starts the runner of an exec request in the session's jail: 0, its pid
	 * and *fd, the gateway's end of its result stream (owned by the caller);
	 * or a negative errno with err. */
	int (*exec_start)(const struct dg_jail *jail, const struct dg_limits *limits,
			  const struct dg_spawn_msg *req, int channel_fd, pid_t *pid, int *fd,
			  struct dg_err *err);
	/* dg_desktop_upload_check */
	int (*upload_check)(const struct dg_jail *j, const char *const *paths, uint32_t n,
			    struct dg_upload_check *out, struct dg_err *err);
	/* dg_desktop_cap_cpu */
	int (*desktop_cap_cpu)(struct dg_desktop *d, const struct dg_limits *lim,
			       struct dg_err *err);
};

struct dg_spawner_state;

/* A spawner's state serving channel fd with the effects fx (borrowed). */
struct dg_spawner_state *dg_spawner_state_new(int fd, bool verbose, const struct dg_spawner_fx *fx);

/* Serves one datagram of len bytes that came with nfds descriptors (the
 * caller closed them): 0 when it was a valid request (answered: one reply
 * sent), -EPROTO when it was not one (nothing sent: the caller ends the
 * connection), -EPIPE when a reply could not be sent. err says why. */
int dg_spawner_serve(struct dg_spawner_state *sp, const uint8_t *buf, size_t len, int nfds,
		     struct dg_err *err);

/* Ends every session through the effects and frees the state. */
void dg_spawner_state_free(struct dg_spawner_state *sp);

#endif
