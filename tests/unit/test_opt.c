/* The command-line parser (cli/opt.h) at its edges: every kind of
 * option, values with and without '=', positionals, --, --help, limits, and
 * the help text built from the same table. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

struct args {
	const char *policy, *profile, *out;
	bool json;
	const char *list[3];
	int n_list;
	const char *pos;
	char **rest;
	int n_rest;
};

static const char *const profiles[] = {"xterm", "browser", NULL};

static const struct dg_opt opts[] = {
	DG_OPT_VALUE_(struct args, policy, "--policy", "FILE", 0, "a policy"),
	DG_OPT_CHOICE_(struct args, profile, "--profile", "xterm|browser", profiles, 0, "a profile"),
	DG_OPT_VALUE_(struct args, out, "-o", "FILE.png", 0, "an output"),
	DG_OPT_SWITCH_(struct args, json, "--json", "JSON out"),
	DG_OPT_LIST_(struct args, list, n_list, "--map", "A=B", DG_OPT_TESTS_ONLY, "a mapping"),
	DG_OPT_END,
};

static const struct dg_opt_cmd one = {
	.name = "one", .summary = "One positional.", .pos = DG_POS_ONE, .pos_name = "DIR",
	.pos_offset = offsetof(struct args, pos), .opts = opts,
};

static const struct dg_opt_cmd rest = {
	.name = "rest", .summary = "The rest.", .pos = DG_POS_REST, .pos_name = "CMD [ARGS...]",
	.pos_what = "command", .pos_offset = offsetof(struct args, rest),
	.pos_count_offset = offsetof(struct args, n_rest), .opts = opts,
};

static const struct dg_opt req_opts[] = {
	DG_OPT_VALUE_(struct args, policy, "--policy", "FILE", DG_OPT_REQUIRED, "a policy"),
	DG_OPT_SWITCH_(struct args, json, "--json", "JSON out"),
	DG_OPT_END,
};

static const struct dg_opt_cmd none = {
	.name = "none", .summary = "No positional; --policy required.", .opts = req_opts,
};

static char why[DG_OPT_WHY_MAX];

/* Parses a NULL-ended argument list (argv[0] "cmd" is added) into *a. */
#define PARSE(cmd, a, ...)                                                                    \
	({                                                                                    \
		char *argv_[] = {"cmd", __VA_ARGS__, NULL};                                   \
		memset((a), 0, sizeof(*(a)));                                                 \
		dg_opt_parse((cmd), (int)(sizeof(argv_) / sizeof(argv_[0])) - 1, argv_, (a), why, \
			     sizeof(why));                                                    \
	})

Test(opt, values_with_a_space_or_an_equals_sign)
{
	struct args a;
	cr_assert_eq(PARSE(&one, &a, "--policy", "p.json", "--profile=browser", "-o", "x.png",
			   "--json", "dir"), DG_OPT_OK, "%s", why);
	cr_assert_str_eq(a.policy, "p.json");
	cr_assert_str_eq(a.profile, "browser");
	cr_assert_str_eq(a.out, "x.png");
	cr_assert(a.json);
	cr_assert_str_eq(a.pos, "dir");
	/* A value is the next argument whatever it looks like. */
	cr_assert_eq(PARSE(&one, &a, "--policy", "--json", "dir"), DG_OPT_OK, "%s", why);
	cr_assert_str_eq(a.policy, "--json");
	cr_assert_not(a.json);
	/* "=" inside a value given with "=" stays in the value. */
	cr_assert_eq(PARSE(&one, &a, "--policy=a=b", "dir"), DG_OPT_OK, "%s", why);
	cr_assert_str_eq(a.policy, "a=b");
	/* Short options take no "=" form: "-o=x" is an unknown option. */
	cr_assert_eq(PARSE(&one, &a, "-o=x", "dir"), DG_OPT_BAD);
	cr_assert_str_eq(why, "unknown option -o=x");
}

Test(opt, missing_empty_and_repeated_values)
{
	struct args a;
	cr_assert_eq(PARSE(&one, &a, "dir", "--policy"), DG_OPT_BAD);
	cr_assert_str_eq(why, "--policy needs a value (FILE)");
	cr_assert_eq(PARSE(&one, &a, "--policy=", "dir"), DG_OPT_BAD);
	cr_assert_str_eq(why, "--policy needs a non-empty value (FILE)");
	cr_assert_eq(PARSE(&one, &a, "--policy", "", "dir"), DG_OPT_BAD);
	cr_assert_str_eq(why, "--policy needs a non-empty value (FILE)");
	cr_assert_eq(PARSE(&one, &a, "--policy", "a", "--policy=b", "dir"), DG_OPT_BAD);
	cr_assert_str_eq(why, "--policy given twice");
	/* A switch twice is still the switch. */
	cr_assert_eq(PARSE(&one, &a, "--json", "--json", "dir"), DG_OPT_OK, "%s", why);
	cr_assert(a.json);
	cr_assert_eq(PARSE(&one, &a, "--json=yes", "dir"), DG_OPT_BAD);
	cr_assert_str_eq(why, "--json takes no value");
}

Test(opt, unknown_options_and_prefixes_are_errors)
{
	struct args a;
	cr_assert_eq(PARSE(&one, &a, "--frobnicate", "dir"), DG_OPT_BAD);
	cr_assert_str_eq(why, "unknown option --frobnicate");
	/* No abbreviations: --pol is not --policy, --policyx is not either. */
	cr_assert_eq(PARSE(&one, &a, "--pol", "x", "dir"), DG_OPT_BAD);
	cr_assert_str_eq(why, "unknown option --pol");
	cr_assert_eq(PARSE(&one, &a, "--policyx=1", "dir"), DG_OPT_BAD);
	cr_assert_str_eq(why, "unknown option --policyx");
	cr_assert_eq(PARSE(&one, &a, "-x"), DG_OPT_BAD);
	cr_assert_str_eq(why, "unknown option -x");
	/* Options are case-sensitive. */
	cr_assert_eq(PARSE(&one, &a, "--JSON", "dir"), DG_OPT_BAD);
}

Test(opt, choices)
{
	struct args a;
	cr_assert_eq(PARSE(&one, &a, "--profile", "xterm", "d"), DG_OPT_OK, "%s", why);
	cr_assert_eq(PARSE(&one, &a, "--profile", "Xterm", "d"), DG_OPT_BAD);
	cr_assert_str_eq(why, "--profile must be xterm or browser, not \"Xterm\"");
	cr_assert_eq(PARSE(&one, &a, "--profile", "xterm ", "d"), DG_OPT_BAD);
}

Test(opt, lists_collect_up_to_their_size)
{
	struct args a;
	cr_assert_eq(PARSE(&one, &a, "--map", "a", "--map=b", "--map", "c", "d"), DG_OPT_OK, "%s",
		     why);
	cr_assert_eq(a.n_list, 3);
	cr_assert_str_eq(a.list[0], "a");
	cr_assert_str_eq(a.list[1], "b");
	cr_assert_str_eq(a.list[2], "c");
	cr_assert_eq(PARSE(&one, &a, "--map", "a", "--map", "b", "--map", "c", "--map", "x", "d"),
		     DG_OPT_BAD);
	cr_assert_str_eq(why, "--map given more than 3 times");
	cr_assert_eq(a.n_list, 3, "nothing written past the array");
}

Test(opt, one_positional)
{
	struct args a;
	/* Anywhere among the options. */
	cr_assert_eq(PARSE(&one, &a, "dir", "--json"), DG_OPT_OK, "%s", why);
	cr_assert_str_eq(a.pos, "dir");
	cr_assert_eq(PARSE(&one, &a, "--json"), DG_OPT_BAD);
	cr_assert_str_eq(why, "no DIR given");
	cr_assert_eq(PARSE(&one, &a, "a", "b"), DG_OPT_BAD);
	cr_assert_str_eq(why, "unexpected argument \"b\"");
	/* "-" is a positional (stdin, by convention), not an option. */
	cr_assert_eq(PARSE(&one, &a, "-"), DG_OPT_OK, "%s", why);
	cr_assert_str_eq(a.pos, "-");
	/* After --, what looks like an option is the positional. */
	cr_assert_eq(PARSE(&one, &a, "--json", "--", "--policy"), DG_OPT_OK, "%s", why);
	cr_assert_str_eq(a.pos, "--policy");
	cr_assert_null(a.policy);
}

/* DG_POS_REST points into argv: each case keeps its own argv alive. */
#define PARSE_REST(a, ...)                                                                  \
	char *argv_rest[] = {"cmd", __VA_ARGS__, NULL};                                     \
	memset((a), 0, sizeof(*(a)));                                                       \
	int rc_rest = dg_opt_parse(&rest, (int)(sizeof(argv_rest) / sizeof(argv_rest[0])) - 1, \
				   argv_rest, (a), why, sizeof(why))

Test(opt, the_rest_starts_at_the_first_positional)
{
	struct args a;
	{
		PARSE_REST(&a, "--policy", "p", "python3", "--help", "-c", "x");
		cr_assert_eq(rc_rest, DG_OPT_OK, "%s", why);
		cr_assert_eq(a.n_rest, 4);
		cr_assert_eq(a.rest, argv_rest + 3);
		cr_assert_str_eq(a.rest[0], "python3");
		cr_assert_str_eq(a.rest[1], "--help");
		cr_assert_null(a.rest[4], "the rest is NULL-ended, as argv is");
	}
	{
		PARSE_REST(&a, "--", "--policy", "x");
		cr_assert_eq(rc_rest, DG_OPT_OK, "%s", why);
		cr_assert_eq(a.n_rest, 2);
		cr_assert_str_eq(a.rest[0], "--policy", "after --, options are the command's");
		cr_assert_null(a.policy);
	}
	{
		PARSE_REST(&a, "--");
		cr_assert_eq(rc_rest, DG_OPT_BAD);
		cr_assert_str_eq(why, "no command given");
	}
	{
		PARSE_REST(&a, "--json");
		cr_assert_eq(rc_rest, DG_OPT_BAD);
		cr_assert_str_eq(why, "no command given");
	}
}

Test(opt, no_positional_and_required_options)
{
	struct args a;
	cr_assert_eq(PARSE(&none, &a, "--policy", "p"), DG_OPT_OK, "%s", why);
	cr_assert_eq(PARSE(&none, &a, "--json"), DG_OPT_BAD);
	cr_assert_str_eq(why, "--policy is required");
	cr_assert_eq(PARSE(&none, &a, "--policy", "p", "extra"), DG_OPT_BAD);
	cr_assert_str_eq(why, "unexpected argument \"extra\"");
	/* The first problem in argument order is the one reported. */
	cr_assert_eq(PARSE(&none, &a, "--bad", "--policy"), DG_OPT_BAD);
	cr_assert_str_eq(why, "unknown option --bad");
}

Test(opt, help_anywhere_before_the_rest)
{
	struct args a;
	cr_assert_eq(PARSE(&none, &a, "--help"), DG_OPT_HELP, "before the required check");
	cr_assert_eq(PARSE(&none, &a, "--json", "-h"), DG_OPT_HELP);
	cr_assert_eq(PARSE(&one, &a, "dir", "--help"), DG_OPT_HELP);
	cr_assert_eq(PARSE(&rest, &a, "--help", "ls"), DG_OPT_HELP);
	/* --help as a value or after -- is not help. */
	cr_assert_eq(PARSE(&one, &a, "--policy", "--help", "dir"), DG_OPT_OK, "%s", why);
	cr_assert_eq(PARSE(&one, &a, "--", "--help"), DG_OPT_OK, "%s", why);
	cr_assert_str_eq(a.pos, "--help");
	cr_assert_eq(PARSE(&one, &a, "--help=1"), DG_OPT_BAD);
}

Test(opt, messages_are_bounded)
{
	struct args a;
	static char huge[20000];
	memset(huge, 'x', sizeof(huge) - 1);
	huge[0] = huge[1] = '-';
	cr_assert_eq(PARSE(&one, &a, huge), DG_OPT_BAD);
	cr_assert_lt(strlen(why), 200, "the option's name is cut in the message");
	cr_assert_eq(PARSE(&one, &a, "--profile", huge + 2, "d"), DG_OPT_BAD);
	cr_assert_lt(strlen(why), 200);
	/* A tiny or absent buffer is not overrun. */
	char small[8];
	char *argv[] = {"cmd", "--frobnicate", NULL};
	memset(&a, 0, sizeof(a));
	cr_assert_eq(dg_opt_parse(&one, 2, argv, &a, small, sizeof(small)), DG_OPT_BAD);
	cr_assert_str_eq(small, "unknown");
	cr_assert_eq(dg_opt_parse(&one, 2, argv, &a, NULL, 0), DG_OPT_BAD);
}

static char *capture(void (*fn)(const struct dg_opt_cmd *, FILE *), const struct dg_opt_cmd *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	cr_assert(f);
	fn(c, f);
	fclose(f);
	return buf;
}

static void assert_width(const char *text)
{
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		cr_assert_leq(n, DG_OPT_WIDTH, "line longer than %d: %.*s", DG_OPT_WIDTH, (int)n, p);
		p += n + (p[n] == '\n');
	}
}

Test(opt, help_lists_every_option_from_the_table)
{
	char *h = capture(dg_opt_print_help, &rest);
	for (const struct dg_opt *o = opts; o->name; o++)
		cr_assert(strstr(h, o->name), "%s missing from:\n%s", o->name, h);
	cr_assert(strstr(h, "usage: deskgate rest [--policy FILE]"), "%s", h);
	cr_assert(strstr(h, "[--map A=B]..."), "a list is marked repeatable: %s", h);
	cr_assert(strstr(h, "(repeatable; tests only)"), "%s", h);
	cr_assert(strstr(h, "[--] CMD [ARGS...]"), "%s", h);
	cr_assert(strstr(h, "-h, --help"), "%s", h);
	assert_width(h);
	free(h);
	h = capture(dg_opt_print_usage, &none);
	cr_assert_str_eq(h, "usage: deskgate none --policy FILE [--json]\n", "required: no brackets");
	free(h);
}

Test(opt, long_synopses_wrap_below_the_width)
{
	static const struct dg_opt many[] = {
		DG_OPT_VALUE_(struct args, policy, "--a-rather-long-option", "SOME_VALUE", 0, "x"),
		DG_OPT_VALUE_(struct args, profile, "--another-long-option", "OTHER_VALUE", 0, "x"),
		DG_OPT_VALUE_(struct args, out, "--a-third-one", "THIRD_VALUE_HERE", 0,
			      "a help text long enough to need wrapping onto a second line and "
			      "then onto a third line of the help"),
		DG_OPT_END,
	};
	const struct dg_opt_cmd c = {.name = "wide", .summary = "Wide.", .pos = DG_POS_ONE,
				     .pos_name = "POSITIONAL", .stdin_note = "< input.jsonl",
				     .pos_offset = offsetof(struct args, pos), .opts = many};
	char *h = capture(dg_opt_print_help, &c);
	assert_width(h);
	cr_assert(strstr(h, "< input.jsonl"), "%s", h);
	free(h);
}

Test(opt, handle_maps_outcomes_to_exit_statuses, .init = cr_redirect_stderr)
{
	struct args a = {0};
	char *ok[] = {"cmd", "dir", NULL};
	cr_assert_eq(dg_opt_handle(&one, 2, ok, &a), -1, "go on");
	char *bad[] = {"cmd", "--nope", NULL};
	memset(&a, 0, sizeof(a));
	cr_assert_eq(dg_opt_handle(&one, 2, bad, &a), DG_OPT_EXIT_USAGE);
	fflush(stderr);
	cr_assert_stderr_eq_str("deskgate one: unknown option --nope\n"
				"usage: deskgate one [--policy FILE] [--profile xterm|browser] [-o FILE.png]\n"
				"                    [--json] [--map A=B]... DIR\n"
				"(deskgate one --help for more)\n");
}

Test(opt, handle_prints_help_to_stdout_and_exits_0, .init = cr_redirect_stdout)
{
	struct args a = {0};
	char *help[] = {"cmd", "--help", NULL};
	cr_assert_eq(dg_opt_handle(&none, 2, help, &a), 0);
	fflush(stdout);
	cr_assert_stdout_eq_str("usage: deskgate none --policy FILE [--json]\n"
				"\n"
				"No positional; --policy required.\n"
				"\n"
				"options:\n"
				"  --policy FILE  a policy (required)\n"
				"  --json         JSON out\n"
				"  -h, --help     print this help and exit\n");
}
