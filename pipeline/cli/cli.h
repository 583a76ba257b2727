/*
 * pipeline/cli — what the `folio` subcommands share beyond the option
 * parser (common/cliopt.h: exit codes, usage errors, option tables): the
 * database connection, the daemons' start-up, GGUF path checks and the
 * option kinds that need pipeline or engine code.
 */
#ifndef FOLIO_PIPELINE_CLI_H
#define FOLIO_PIPELINE_CLI_H

#include "common/cliopt.h"
#include "common/common.h"

#include <stddef.h>
#include <stdio.h>

/* FOLIO_EINVAL naming the flag when path cannot be read, is not a GGUF file, or
 * is one the engine cannot load (truncated, corrupt tensor table, wrong kind):
 * --mmproj is checked as a vision projector, any other flag as a text model. */
int cli_check_gguf(const char *flag, const char *path, struct folio_err *err);

/* CLI_FN takers shared by several commands, each writing at .off:
 * --gpu-weights auto|f16|native|int8 (int, engine_gpu_weights_parse);
 * --max-text-bytes N|PAGE,DOC (size_t[2], doc_text_parse_caps; set .want);
 * an ADDR:PORT to listen on (const char *, checked by http_parse_listen). */
int cli_take_gpu_weights(const struct cli_opt *o, void *args, const char *v, const char *cmd);
int cli_take_text_caps(const struct cli_opt *o, void *args, const char *v, const char *cmd);
int cli_take_listen(const struct cli_opt *o, void *args, const char *v, const char *cmd);

#endif
