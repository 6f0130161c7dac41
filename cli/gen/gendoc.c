// SPDX-License-Identifier: MIT
/*
 * gendoc.c - a build tool, not installed: prints what the man pages and
 * the bash completion take from the subcommands' tables (subcommands.c), so
 * that --help, uzram(1), uzram-CMD(1) and the completion are one text.
 *
 *   uzram-gendoc commands      uzram(1)'s list of commands, in scdoc
 *   uzram-gendoc synopsis CMD  uzram-CMD(1)'s SYNOPSIS, in scdoc
 *   uzram-gendoc options CMD   uzram-CMD(1)'s OPTIONS (and COMMANDS), in scdoc
 *   uzram-gendoc bash          the bash completion script
 *   uzram-gendoc readme        README.md's "every option" block
 *                              (scripts/readme-options.sh puts it there)
 *
 * It links the program's objects but main.c, and reads only the tables.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uzram.h"
#include "../cli.h"

/* s with scdoc's inline markup characters escaped. */
static void scd_text(FILE *f, const char *s, size_t n)
{
	for (size_t i = 0; i < n && s[i]; i++) {
		if (strchr("*_\\", s[i]))
			fputc('\\', f);
		fputc(s[i], f);
	}
}

/* The help's lines as one paragraph, indented one level. */
static void scd_paragraph(FILE *f, const char *help)
{
	fputc('\t', f);
	for (const char *line = help, *nl; line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		scd_text(f, line, nl ? (size_t)(nl - line) : strlen(line));
		if (nl)
			fputc(' ', f);
	}
	fputs("\n\n", f);
}

static const struct cli_command *find_command(const char *name)
{
	for (size_t i = 0; i < cli_ncommands; i++)
		if (!strcmp(cli_commands[i].cmd->name, name))
			return cli_commands[i].cmd;
	fprintf(stderr, "uzram-gendoc: no command '%s'\n", name);
	exit(2);
}

static bool has_short(const struct cli_command *cmd, int key)
{
	return key > 0 && key < 128 && strchr(cmd->shorts, key);
}

static void scd_options(const struct cli_command *cmd, FILE *f)
{
	char syn[160];

	for (const struct cli_option *o = cmd->opts; o->name || o->key; o++) {
		cli_option_synopsis(o, syn, sizeof syn);
		fputc('*', f);
		if (o->name && has_short(cmd, o->key))
			fprintf(f, "-%c*, *", o->key);
		scd_text(f, syn, strlen(syn));
		fputs("*\n", f);
		/* --help's "this text" is the usage, not this page */
		scd_paragraph(f, o->key == 'h' ? "print the usage and every option, "
			      "and exit" : o->help);
	}
	if (!cmd->words)
		return;
	fputs("# COMMANDS\n\n", f);
	for (const struct cli_word *w = cmd->words; w->name; w++) {
		fprintf(f, "*%s*", w->name);
		if (w->args) {
			fputc(' ', f);
			scd_text(f, w->args, strlen(w->args));
		}
		fputc('\n', f);
		scd_paragraph(f, w->help);
	}
}

static void scd_synopsis(const struct cli_command *cmd, FILE *f)
{
	fprintf(f, "*uzram %s* [_OPTION_]...", cmd->name);
	if (cmd->operands) {
		fputc(' ', f);
		scd_text(f, cmd->operands, strlen(cmd->operands));
	}
	fputs("\n\n", f);
	if (cmd->summary)
		scd_paragraph(f, cmd->summary);
}

static void scd_commands(FILE *f)
{
	for (size_t i = 0; i < cli_ncommands; i++) {
		const struct cli_command *cmd = cli_commands[i].cmd;

		fprintf(f, "*uzram %s*", cmd->name);
		if (cmd->operands) {
			fputc(' ', f);
			scd_text(f, cmd->operands, strlen(cmd->operands));
		}
		fprintf(f, "\n\t%s; see *uzram-%s*(1).\n\n", cmd->brief, cmd->name);
	}
}

/* ---- bash ---- */

/* What bash completes after an option that takes arg: a compgen action. */
static const char *arg_action(const char *arg, char *words, size_t n)
{
	if (!strncmp(arg, "ALGO", 4))
		return "algorithms";
	if (strstr(arg, "FILE") || !strcmp(arg, "IMAGE"))
		return "-f";
	if (!strcmp(arg, "PATH"))
		return "-f";
	if (!strcmp(arg, "DIR"))
		return "-d";
	if (strchr(arg, '|') && strspn(arg, "abcdefghijklmnopqrstuvwxyz|") ==
	    strlen(arg)) { /* "off|on|require" */
		snprintf(words, n, "%s", arg);
		for (char *p = words; *p; p++)
			if (*p == '|')
				*p = ' ';
		return words;
	}
	return NULL;
}

/* ctl's argument words: "[type=a|b] [limit=N]" -> "type=a type=b limit=". */
static void word_args(const char *args, FILE *f)
{
	char buf[256], *save = NULL;

	snprintf(buf, sizeof buf, "%s", args);
	for (char *t = strtok_r(buf, " []", &save); t;
	     t = strtok_r(NULL, " []", &save)) {
		char *eq = strchr(t, '=');
		const char *v = eq ? eq + 1 : t;

		if (eq && strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZ-") == strlen(v)) {
			fprintf(f, " %.*s=", (int)(eq - t), t);
			continue;
		}
		for (char *alt = strtok(eq ? eq + 1 : t, "|"); alt;
		     alt = strtok(NULL, "|"))
			if (eq || strspn(alt, "abcdefghijklmnopqrstuvwxyz") ==
			    strlen(alt))
				fprintf(f, " %.*s%s", eq ? (int)(eq - t + 1) : 0, t,
					alt);
	}
}

/* bash: the case of cmd's options that take a value, each completed. */
static void bash_values(FILE *f, const struct cli_command *cmd)
{
	char words[128];

	fprintf(f, "\t\tcase $prev in\n");
	for (const struct cli_option *o = cmd->opts; o->name || o->key; o++) {
		const char *act;

		if (o->has_arg != required_argument || !o->arg)
			continue;
		act = arg_action(o->arg, words, sizeof words);
		if (o->name)
			fprintf(f, "\t\t--%s", o->name);
		if (has_short(cmd, o->key))
			fprintf(f, "%s-%c", o->name ? "|" : "\t\t", o->key);
		if (!act)
			fprintf(f, ") return ;;\n");
		else if (!strcmp(act, "algorithms"))
			fprintf(f, ") mapfile -t COMPREPLY < <(compgen -W '%s' -- \"$cur\"); return ;;\n",
				uzram_algorithms());
		else if (act[0] == '-')
			fprintf(f, ") mapfile -t COMPREPLY < <(compgen %s -- \"$cur\"); return ;;\n",
				act);
		else
			fprintf(f, ") mapfile -t COMPREPLY < <(compgen -W '%s' -- \"$cur\"); return ;;\n",
				act);
	}
	fprintf(f, "\t\tesac\n");
}

/* bash: opts='...', every option of cmd. */
static void bash_opts(FILE *f, const struct cli_command *cmd)
{
	fprintf(f, "\t\topts='");
	for (const struct cli_option *o = cmd->opts; o->name || o->key; o++) {
		if (o->name)
			fprintf(f, "--%s ", o->name);
		if (o->name && o->has_arg == optional_argument)
			fprintf(f, "--%s= ", o->name);
		if (has_short(cmd, o->key))
			fprintf(f, "-%c ", o->key);
	}
	fprintf(f, "'\n");
}

/* bash: a command of words (ctl): find the word, complete its arguments. */
static void bash_words(FILE *f, const struct cli_command *cmd)
{
	bool first = true;

	fprintf(f, "\t\tfor ((i = 2; i < COMP_CWORD; i++)); do\n"
		"\t\t\tcase ${COMP_WORDS[i]} in\n"
		"\t\t\t");
	for (const struct cli_option *o = cmd->opts; o->name || o->key; o++)
		if (o->name && o->has_arg == required_argument) {
			fprintf(f, "%s--%s", first ? "" : "|", o->name);
			first = false;
		}
	/* a command whose options take no value has no such case */
	fprintf(f, "%s\t\t\t-*) ;;\n"
		"\t\t\t*) word=${COMP_WORDS[i]}; break ;;\n",
		first ? "" : ") ((i++)) ;;\n");
	fprintf(f, "\t\t\tesac\n\t\tdone\n"
		"\t\tcase $word in\n\t\t'')\n"
		"\t\t\t[[ $cur == -* ]] && words=$opts || words='");
	for (const struct cli_word *w = cmd->words; w->name; w++)
		fprintf(f, "%s ", w->name);
	fprintf(f, "'\n\t\t\t;;\n");
	for (const struct cli_word *w = cmd->words; w->name; w++) {
		if (w->args && (strstr(w->args, "IMAGE") ||
				strstr(w->args, "FILE"))) {
			fprintf(f, "\t\t%s) mapfile -t COMPREPLY < <(compgen -f -- \"$cur\"); return ;;\n",
				w->name);
			continue;
		}
		fprintf(f, "\t\t%s) words='", w->name);
		if (w->args)
			word_args(w->args, f);
		fprintf(f, "' ;;\n");
	}
	fprintf(f, "\t\t*) words= ;;\n\t\tesac\n"
		"\t\tmapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\")\n"
		"\t\tif [[ ${COMPREPLY[0]-} == *= ]]; then compopt -o nospace 2>/dev/null || :; fi\n"
		"\t\treturn\n\t\t;;\n");
}

/* bash: a command of options and operands (files, a directory). */
static void bash_operands(FILE *f, const struct cli_command *cmd)
{
	fprintf(f, "\t\tif [[ $cur == -* ]]; then\n"
		"\t\t\tmapfile -t COMPREPLY < <(compgen -W \"$opts\" -- \"$cur\")\n"
		"\t\t\tif [[ ${COMPREPLY[0]-} == *= ]]; then compopt -o nospace 2>/dev/null || :; fi\n");
	if (cmd->operands) {
		fprintf(f, "\t\telse\n\t\t\tmapfile -t COMPREPLY < <(compgen %s -- \"$cur\")\n",
			!strcmp(cmd->operands, "DIR") ? "-d" : "-f");
	}
	fprintf(f, "\t\tfi\n\t\t;;\n");
}

static void bash(FILE *f)
{
	fprintf(f, "# bash completion for uzram(1). Made by cli/gen/gendoc.c from the\n"
		"# option tables of the uzram program: do not edit.\n\n"
		"_uzram()\n{\n"
		"\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev= cmd=${COMP_WORDS[1]}\n"
		"\tlocal opts= word= words= i\n"
		"\t((COMP_CWORD > 1)) && prev=${COMP_WORDS[COMP_CWORD-1]}\n"
		"\tCOMPREPLY=()\n"
		"\tif ((COMP_CWORD == 1)); then\n"
		"\t\tmapfile -t COMPREPLY < <(compgen -W '");
	for (size_t i = 0; i < cli_ncommands; i++)
		fprintf(f, "%s ", cli_commands[i].cmd->name);
	fprintf(f, "--help --version' -- \"$cur\")\n\t\treturn\n\tfi\n"
		"\tcase $cmd in\n");
	for (size_t i = 0; i < cli_ncommands; i++) {
		const struct cli_command *cmd = cli_commands[i].cmd;

		fprintf(f, "\t%s)\n", cmd->name);
		bash_values(f, cmd);
		bash_opts(f, cmd);
		if (cmd->words)
			bash_words(f, cmd);
		else
			bash_operands(f, cmd);
	}
	fprintf(f, "\tesac\n}\ncomplete -o filenames -F _uzram uzram\n");
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "commands"))
		scd_commands(stdout);
	else if (argc == 3 && !strcmp(argv[1], "synopsis"))
		scd_synopsis(find_command(argv[2]), stdout);
	else if (argc == 3 && !strcmp(argv[1], "options"))
		scd_options(find_command(argv[2]), stdout);
	else if (argc == 2 && !strcmp(argv[1], "bash"))
		bash(stdout);
	else if (argc == 2 && !strcmp(argv[1], "readme"))
		cli_commands_usage(stdout, true);
	else {
		fprintf(stderr, "usage: uzram-gendoc commands | synopsis CMD | "
			"options CMD | bash | readme\n");
		return 2;
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
