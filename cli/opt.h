/* opt: the command-line parser of every deskgate subcommand.
 *
 * One table per command says which options it takes; the same table drives
 * the parsing, the usage line printed with a usage error, `CMD --help` and
 * the command list of `deskgate help`, so what the program accepts and what
 * it says it accepts cannot drift apart.
 *
 * Grammar (argv[0] is the command's name and is skipped):
 *   --name VALUE and --name=VALUE   an option with a value; VALUE is the next
 *                                   argument whatever it looks like, and may
 *                                   not be empty
 *   --name                          a switch; --name=... is an error
 *   -h, --help                      help, anywhere before the positionals of
 *                                   a DG_POS_REST command
 *   --                              ends the options
 *   anything else starting with '-' (but "-" itself) is an unknown option.
 * A value option given twice is an error (a list option collects up to its
 * max values); an option marked DG_OPT_REQUIRED must be given; choices, when
 * set, are the only values accepted.
 *
 * Values point into argv (nothing is copied or allocated). This module
 * depends on libc only. */
#ifndef DG_OPT_H
#define DG_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define DG_OPT_PROG "deskgate"  /* the one binary's name, in messages and help */
#define DG_OPT_POS_MAX 4        /* positional arguments of a DG_POS_ONE command */
#define DG_OPT_WHY_MAX 512      /* bytes of a usage error message, NUL included */
#define DG_OPT_WIDTH 80         /* columns of the help text */
#define DG_OPT_EXIT_USAGE 2     /* exit status after a usage error */

enum dg_opt_kind {
	DG_OPT_SWITCH = 1, /* --name: sets a bool at offset */
	DG_OPT_VALUE,      /* --name VALUE: sets a const char * at offset, once */
	DG_OPT_LIST,       /* --name VALUE, repeatable: appends to the const char *[max]
			      at offset and counts in the int at count_offset */
};

#define DG_OPT_REQUIRED 1u   /* must be given */
#define DG_OPT_TESTS_ONLY 2u /* for the tests: marked so in the help */

struct dg_opt {
	const char *name;           /* "--policy"; "-o"; NULL ends a table */
	enum dg_opt_kind kind;
	const char *metavar;        /* "FILE"; NULL for a switch */
	const char *const *choices; /* NULL, or the only values accepted (NULL-ended) */
	size_t offset;              /* the destination in the command's args struct */
	size_t count_offset;        /* DG_OPT_LIST: its int count */
	int max;                    /* DG_OPT_LIST: the size of its array */
	unsigned flags;             /* DG_OPT_REQUIRED, DG_OPT_TESTS_ONLY */
	const char *help;           /* one sentence for --help */
};

#define DG_OPT_SWITCH_(T, field, nm, hlp) \
	{ .name = (nm), .kind = DG_OPT_SWITCH, .offset = offsetof(T, field), .help = (hlp) }
#define DG_OPT_VALUE_(T, field, nm, meta, fl, hlp)                                         \
	{ .name = (nm), .kind = DG_OPT_VALUE, .metavar = (meta), .offset = offsetof(T, field), \
	  .flags = (fl), .help = (hlp) }
#define DG_OPT_CHOICE_(T, field, nm, meta, ch, fl, hlp)                                    \
	{ .name = (nm), .kind = DG_OPT_VALUE, .metavar = (meta), .choices = (ch),          \
	  .offset = offsetof(T, field), .flags = (fl), .help = (hlp) }
#define DG_OPT_LIST_(T, field, count, nm, meta, fl, hlp)                                   \
	{ .name = (nm), .kind = DG_OPT_LIST, .metavar = (meta), .offset = offsetof(T, field), \
	  .count_offset = offsetof(T, count),                                                 \
	  .max = (int)(sizeof(((T *)0)->field) / sizeof(((T *)0)->field[0])), .flags = (fl),   \
	  .help = (hlp) }
#define DG_OPT_END { .name = NULL }

enum dg_opt_pos {
	DG_POS_NONE = 0, /* no positional argument */
	DG_POS_ONE,      /* exactly one, anywhere among the options: a const char * at
			    pos_offset */
	DG_POS_REST,     /* one or more: the options end at the first one (or at --);
			    a char ** at pos_offset, their number in the int at
			    pos_count_offset */
};

struct dg_opt_cmd {
	const char *name;       /* "exec" */
	const char *summary;    /* one line: what it does */
	const char *details;    /* paragraphs for --help after the options, or NULL */
	const char *doc;        /* the documentation page, "docs/jail.md", or NULL */
	const char *stdin_note; /* shown after the synopsis, "< actions.jsonl", or NULL */
	enum dg_opt_pos pos;
	const char *pos_name;   /* "RECORDING_DIR"; "CMD [ARGS...]" */
	const char *pos_what;   /* "recording directory": "no <it> given" when
				   missing (default: pos_name's first word) */
	size_t pos_offset, pos_count_offset;
	const struct dg_opt *opts; /* ended by DG_OPT_END */
};

enum {
	DG_OPT_OK = 0,   /* parsed: the command goes on */
	DG_OPT_HELP = 1, /* -h or --help was given */
	DG_OPT_BAD = -1, /* a usage error, described in why */
};

/* Parses argv[1..argc-1] into args (a struct the table's offsets point into;
 * the caller zeroes it first, so unset values are NULL/false/0). Returns
 * DG_OPT_OK, DG_OPT_HELP, or DG_OPT_BAD with a message in why (why_len
 * bytes, at most DG_OPT_WHY_MAX are used). On DG_OPT_BAD args may be
 * partly filled. */
int dg_opt_parse(const struct dg_opt_cmd *cmd, int argc, char **argv, void *args, char *why,
		 size_t why_len);

/* dg_opt_parse for a command's entry point: returns -1 when the command
 * should go on; otherwise the status to exit with: 0 after printing the help
 * to stdout, DG_OPT_EXIT_USAGE after printing the error and the usage line to
 * stderr. */
int dg_opt_handle(const struct dg_opt_cmd *cmd, int argc, char **argv, void *args);

/* A usage error found after parsing (options that exclude each other, ...):
 * prints "deskgate CMD: <message>" and the usage line to stderr, returns
 * DG_OPT_EXIT_USAGE. */
int dg_opt_usage_error(const struct dg_opt_cmd *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "usage: deskgate CMD [--opt VALUE]... POSITIONAL" wrapped to DG_OPT_WIDTH,
 * with a newline. */
void dg_opt_print_usage(const struct dg_opt_cmd *cmd, FILE *out);

/* The full help of one command: usage, summary, one line per option
 * (--help included), details and the documentation page. */
void dg_opt_print_help(const struct dg_opt_cmd *cmd, FILE *out);

/* The synopsis alone, "deskgate CMD [--opt VALUE]... POSITIONAL", wrapped
 * with continuation lines indented by indent columns. */
void dg_opt_print_synopsis(const struct dg_opt_cmd *cmd, int indent, FILE *out);

/* The summary's first sentence (up to its first ';' or '.'), indented and
 * wrapped: the one-line description in a list of commands. */
void dg_opt_print_summary(const struct dg_opt_cmd *cmd, int indent, FILE *out);

#endif
