/* opt: table-driven command-line parsing and help (see opt.h). */
#include "cli/opt.h"

#include <stdarg.h>
#include <string.h>

#define HELP_COL_MAX 30 /* options longer than this get their help on the next line */

static void *at(void *args, size_t offset)
{
	return (char *)args + offset;
}

/* Formats into why, truncated to what fits; returns DG_OPT_BAD. */
__attribute__((format(printf, 3, 4))) static int bad(char *why, size_t why_len, const char *fmt,
						     ...)
{
	if (why && why_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, why_len < DG_OPT_WHY_MAX ? why_len : DG_OPT_WHY_MAX, fmt, ap);
		va_end(ap);
	}
	return DG_OPT_BAD;
}

/* The option named by a (its part before '=' when a starts with "--"). */
static const struct dg_opt *find(const struct dg_opt *opts, const char *a, size_t name_len)
{
	for (const struct dg_opt *o = opts; o && o->name; o++)
		if (strlen(o->name) == name_len && strncmp(o->name, a, name_len) == 0)
			return o;
	return NULL;
}

static bool is_choice(const char *const *choices, const char *v)
{
	for (; *choices; choices++)
		if (strcmp(*choices, v) == 0)
			return true;
	return false;
}

/* "a, b or c" into buf. */
static void list_choices(const char *const *choices, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; choices[i] && n < len; i++) {
		const char *sep = i == 0 ? "" : choices[i + 1] ? ", " : " or ";
		int w = snprintf(buf + n, len - n, "%s%s", sep, choices[i]);
		if (w < 0)
			break;
		n += (size_t)w;
	}
}

static int take_value(const struct dg_opt *o, const char *v, void *args, char *why,
		      size_t why_len)
{
	if (!v[0])
		return bad(why, why_len, "%s needs a non-empty value (%s)", o->name, o->metavar);
	if (o->choices && !is_choice(o->choices, v)) {
		char list[256];
		list_choices(o->choices, list, sizeof(list));
		return bad(why, why_len, "%s must be %s, not \"%.100s\"", o->name, list, v);
	}
	if (o->kind == DG_OPT_VALUE) {
		const char **dst = at(args, o->offset);
		if (*dst)
			return bad(why, why_len, "%s given twice", o->name);
		*dst = v;
		return DG_OPT_OK;
	}
	int *count = at(args, o->count_offset);
	if (*count < 0 || *count >= o->max)
		return bad(why, why_len, "%s given more than %d times", o->name, o->max);
	const char **list = at(args, o->offset);
	list[(*count)++] = v;
	return DG_OPT_OK;
}

/* The first word of a positional's name: "CMD [ARGS...]" -> "CMD". */
static int first_word_len(const char *s)
{
	return (int)strcspn(s, " [");
}

static int missing_positional(const struct dg_opt_cmd *cmd, char *why, size_t why_len)
{
	if (cmd->pos_what)
		return bad(why, why_len, "no %s given", cmd->pos_what);
	const char *name = cmd->pos_name ? cmd->pos_name : "argument";
	return bad(why, why_len, "no %.*s given", first_word_len(name), name);
}

int dg_opt_parse(const struct dg_opt_cmd *cmd, int argc, char **argv, void *args, char *why,
		 size_t why_len)
{
	if (why && why_len)
		why[0] = '\0';
	bool options_ended = false;
	const char **one = cmd->pos == DG_POS_ONE ? at(args, cmd->pos_offset) : NULL;
	bool have_rest = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!options_ended && strcmp(a, "--") == 0) {
			options_ended = true;
			continue;
		}
		if (options_ended || a[0] != '-' || a[1] == '\0') {
			if (cmd->pos == DG_POS_REST) {
				*(char ***)at(args, cmd->pos_offset) = argv + i;
				*(int *)at(args, cmd->pos_count_offset) = argc - i;
				have_rest = true;
				break;
			}
			if (cmd->pos == DG_POS_ONE && !*one) {
				*one = a;
				continue;
			}
			return bad(why, why_len, "unexpected argument \"%.100s\"", a);
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			return DG_OPT_HELP;
		const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
		size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
		const struct dg_opt *o = find(cmd->opts, a, name_len);
		if (!o)
			return bad(why, why_len, "unknown option %.*s", (int)(name_len > 100 ? 100 : name_len), a);
		if (o->kind == DG_OPT_SWITCH) {
			if (eq)
				return bad(why, why_len, "%s takes no value", o->name);
			*(bool *)at(args, o->offset) = true;
			continue;
		}
		const char *v = eq ? eq + 1 : NULL;
		if (!v) {
			if (i + 1 >= argc)
				return bad(why, why_len, "%s needs a value (%s)", o->name, o->metavar);
			v = argv[++i];
		}
		int rc = take_value(o, v, args, why, why_len);
		if (rc != DG_OPT_OK)
			return rc;
	}
	for (const struct dg_opt *o = cmd->opts; o && o->name; o++) {
		if (!(o->flags & DG_OPT_REQUIRED))
			continue;
		bool given = o->kind == DG_OPT_SWITCH ? *(bool *)at(args, o->offset)
			   : o->kind == DG_OPT_VALUE  ? *(const char **)at(args, o->offset) != NULL
						      : *(int *)at(args, o->count_offset) > 0;
		if (!given)
			return bad(why, why_len, "%s is required", o->name);
	}
	if ((cmd->pos == DG_POS_ONE && !*one) || (cmd->pos == DG_POS_REST && !have_rest))
		return missing_positional(cmd, why, why_len);
	return DG_OPT_OK;
}

/* ---- help ------------------------------------------------------------------ */

/* One synopsis element of o: "--policy FILE", "[--json]", "[--x V]...". */
static void element(const struct dg_opt *o, char *buf, size_t len)
{
	bool req = o->flags & DG_OPT_REQUIRED;
	const char *sp = o->metavar ? " " : "", *meta = o->metavar ? o->metavar : "";
	snprintf(buf, len, "%s%s%s%s%s%s", req ? "" : "[", o->name, sp, meta, req ? "" : "]",
		 o->kind == DG_OPT_LIST ? "..." : "");
}

/* Prints word (an unbreakable unit) after a space at *col, or at the start
 * of a new line indented by indent when it would pass DG_OPT_WIDTH. A word
 * at column indent (a fresh line) gets no space. */
static void put_word(FILE *out, const char *word, int indent, int *col)
{
	int w = (int)strlen(word);
	if (*col != indent) {
		if (*col + 1 + w > DG_OPT_WIDTH) {
			fprintf(out, "\n%*s", indent, "");
			*col = indent;
		} else {
			fputc(' ', out);
			(*col)++;
		}
	}
	fputs(word, out);
	*col += w;
}

/* prefix, then "deskgate CMD [--opt VALUE]... POSITIONAL" wrapped to
 * DG_OPT_WIDTH, continuation lines aligned after the command's name. */
static void synopsis(const struct dg_opt_cmd *cmd, const char *prefix, FILE *out)
{
	char buf[256];
	snprintf(buf, sizeof(buf), "%s%s %s", prefix, DG_OPT_PROG, cmd->name);
	fputs(buf, out);
	int col = (int)strlen(buf);
	int cont = col + 1;
	if (cont > DG_OPT_WIDTH / 2)
		cont = (int)strlen(prefix) + 4;
	for (const struct dg_opt *o = cmd->opts; o && o->name; o++) {
		element(o, buf, sizeof(buf));
		put_word(out, buf, cont, &col);
	}
	if (cmd->pos == DG_POS_REST)
		put_word(out, "[--]", cont, &col);
	if (cmd->pos != DG_POS_NONE && cmd->pos_name)
		put_word(out, cmd->pos_name, cont, &col);
	if (cmd->stdin_note)
		put_word(out, cmd->stdin_note, cont, &col);
	fputc('\n', out);
}

void dg_opt_print_synopsis(const struct dg_opt_cmd *cmd, int indent, FILE *out)
{
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "%*s", indent < 0 ? 0 : indent > 32 ? 32 : indent, "");
	synopsis(cmd, prefix, out);
}

void dg_opt_print_usage(const struct dg_opt_cmd *cmd, FILE *out)
{
	synopsis(cmd, "usage: ", out);
}

/* Word-wraps text from column col (already printed) with continuation
 * lines indented by indent, and ends the line. */
static void wrap(FILE *out, const char *text, int col, int indent)
{
	const char *p = text;
	bool first = true;
	while (*p) {
		size_t w = strcspn(p, " ");
		if (!first && col + 1 + (int)w > DG_OPT_WIDTH) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
		} else if (!first) {
			fputc(' ', out);
			col++;
		}
		fwrite(p, 1, w, out);
		col += (int)w;
		first = false;
		p += w;
		while (*p == ' ')
			p++;
	}
	fputc('\n', out);
}

static void option_line(FILE *out, const char *left, const char *help, int help_col)
{
	fprintf(out, "  %s", left);
	int col = 2 + (int)strlen(left);
	if (col + 2 > help_col) {
		fprintf(out, "\n%*s", help_col, "");
	} else {
		fprintf(out, "%*s", help_col - col, "");
	}
	wrap(out, help, help_col, help_col);
}

void dg_opt_print_help(const struct dg_opt_cmd *cmd, FILE *out)
{
	dg_opt_print_usage(cmd, out);
	fputc('\n', out);
	wrap(out, cmd->summary, 0, 0);
	int help_col = (int)strlen("  -h, --help") + 2;
	char left[256];
	for (const struct dg_opt *o = cmd->opts; o && o->name; o++) {
		snprintf(left, sizeof(left), "%s%s%s", o->name, o->metavar ? " " : "",
			 o->metavar ? o->metavar : "");
		int w = 2 + (int)strlen(left) + 2;
		if (w > help_col && w <= HELP_COL_MAX)
			help_col = w;
	}
	fputs("\noptions:\n", out);
	for (const struct dg_opt *o = cmd->opts; o && o->name; o++) {
		char help[1024], notes[64] = "";
		snprintf(left, sizeof(left), "%s%s%s", o->name, o->metavar ? " " : "",
			 o->metavar ? o->metavar : "");
		const char *note[3] = {o->flags & DG_OPT_REQUIRED ? "required" : NULL,
				       o->kind == DG_OPT_LIST ? "repeatable" : NULL,
				       o->flags & DG_OPT_TESTS_ONLY ? "tests only" : NULL};
		for (int k = 0; k < 3; k++) {
			size_t n = strlen(notes);
			if (note[k])
				snprintf(notes + n, sizeof(notes) - n, "%s%s", n ? "; " : " (", note[k]);
		}
		size_t n = strlen(notes);
		if (n)
			snprintf(notes + n, sizeof(notes) - n, ")");
		snprintf(help, sizeof(help), "%s%s", o->help ? o->help : "", notes);
		option_line(out, left, help, help_col);
	}
	option_line(out, "-h, --help", "print this help and exit", help_col);
	if (cmd->details)
		fprintf(out, "\n%s", cmd->details);
	if (cmd->doc)
		fprintf(out, "\nDocumentation: %s\n", cmd->doc);
}

void dg_opt_print_summary(const struct dg_opt_cmd *cmd, int indent, FILE *out)
{
	size_t n = strcspn(cmd->summary, ";.");
	char first[512];
	snprintf(first, sizeof(first), "%.*s", (int)(n < sizeof(first) ? n : sizeof(first) - 1),
		 cmd->summary);
	fprintf(out, "%*s", indent, "");
	wrap(out, first, indent, indent);
}

static void usage_to(const struct dg_opt_cmd *cmd, FILE *out)
{
	dg_opt_print_usage(cmd, out);
	fprintf(out, "(%s %s --help for more)\n", DG_OPT_PROG, cmd->name);
}

int dg_opt_usage_error(const struct dg_opt_cmd *cmd, const char *fmt, ...)
{
	fprintf(stderr, "%s %s: ", DG_OPT_PROG, cmd->name);
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage_to(cmd, stderr);
	return DG_OPT_EXIT_USAGE;
}

int dg_opt_handle(const struct dg_opt_cmd *cmd, int argc, char **argv, void *args)
{
	char why[DG_OPT_WHY_MAX];
	int rc = dg_opt_parse(cmd, argc, argv, args, why, sizeof(why));
	if (rc == DG_OPT_OK)
		return -1;
	if (rc == DG_OPT_HELP) {
		dg_opt_print_help(cmd, stdout);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	return dg_opt_usage_error(cmd, "%s", why);
}
