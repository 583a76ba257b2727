/*
 * Private to pipeline/: the small HTTP servers folio runs (metrics and
 * health of worker and ingest, `folio report --listen`), on libmicrohttpd
 * with its one internal thread. That thread blocks every signal: the
 * commands take SIGTERM/SIGINT through a signalfd or sigwait, and a
 * process-directed signal delivered to an unblocked thread would kill the
 * process instead.
 */
#ifndef FOLIO_PIPELINE_HTTP_H
#define FOLIO_PIPELINE_HTTP_H

#include "common/common.h"

#include <microhttpd.h>

/* Checks "ADDR:PORT", ":PORT" or "[v6]:PORT" (port 0 = any free port);
 * option names the flag for messages. */
int http_parse_listen(const char *option, const char *listen, struct folio_err *err);

/* Binds and starts serving; logs event=<event> with the bound port, which
 * *port_out (may be NULL) also gets. A port in use is an error naming it. */
int http_start(const char *option, const char *listen, const char *event, MHD_AccessHandlerCallback handler,
               void *cls, struct MHD_Daemon **out, int *port_out, struct folio_err *err);

/* Whether more connections are open than are served at once; a handler
 * that sees it answers http_refuse_busy (503, Retry-After, close) instead
 * of making every client wait or be reset. */
int http_busy(struct MHD_Connection *c);
enum MHD_Result http_refuse_busy(struct MHD_Connection *c);

/* Queues body (malloc'd, taken over; NULL = empty) with a content type and
 * no caching. */
enum MHD_Result http_reply(struct MHD_Connection *c, unsigned int status, const char *ctype, char *body,
                           size_t len);

#endif
