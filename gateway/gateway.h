/* gateway: the network-facing side and the command line.
 *
 * Today it holds the command-line tools built on the desktop module; the
 * HTTP/WebSocket server joins it next. Each cmd_* function parses its own
 * arguments strictly and returns the process exit status.
 */
#ifndef DG_GATEWAY_H
#define DG_GATEWAY_H

#define DG_EXIT_USAGE 2
#define DG_EXIT_FAILED 125

/* Script files of `deskgate desktop`: bounds on what is read. */
#define DG_SCRIPT_LINE_MAX (64 * 1024)
#define DG_SCRIPT_LINES_MAX 100000
/* How long one action may take end to end before the tool gives up. */
#define DG_CLI_ACTION_TIMEOUT_MS 90000

int dg_cmd_shot(int argc, char **argv);
int dg_cmd_desktop(int argc, char **argv);

#endif
