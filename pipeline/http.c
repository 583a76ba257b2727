/* libmicrohttpd servers (http.h). */
#include "pipeline/http.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Splits ADDR:PORT into host ("" = any) and port. */
static int split_listen(const char *option, const char *s, char *host, size_t hn, char *port, size_t pn,
                        struct folio_err *err)
{
    const char *colon = strrchr(s ? s : "", ':');
    if (!s || !colon || colon[1] == '\0') {
        folio_err_set(err, FOLIO_EINVAL, "%s wants ADDR:PORT, got '%s'", option, s ? s : "");
        folio_err_hint(err, "for example 127.0.0.1:9464, :9464 (every address) or [::1]:9464");
        return FOLIO_EINVAL;
    }
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= hn || strlen(colon + 1) >= pn)
        return folio_err_set(err, FOLIO_EINVAL, "%s '%s' is too long", option, s);
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, pn, "%s", colon + 1);
    long long p;
    if (folio_parse_int(port, 0, 65535, &p) != 0) {
        folio_err_set(err, FOLIO_EINVAL, "%s '%s': port '%s' is not 0..65535", option, s, port);
        folio_err_hint(err, "for example 127.0.0.1:9464");
        return FOLIO_EINVAL;
    }
    return 0;
}

int http_parse_listen(const char *option, const char *listen, struct folio_err *err)
{
    char host[256], port[16];
    return split_listen(option, listen, host, sizeof host, port, sizeof port, err);
}

int http_start(const char *option, const char *listen, const char *event, MHD_AccessHandlerCallback handler,
               void *cls, struct MHD_Daemon **out, int *port_out, struct folio_err *err)
{
    *out = NULL;
    char host[256], port[16];
    if (split_listen(option, listen, host, sizeof host, port, sizeof port, err))
        return FOLIO_EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gai != 0 || !ai) {
        folio_err_set(err, FOLIO_EINVAL, "%s %s: cannot resolve '%s'", option, listen, host);
        folio_err_detail(err, "%s", gai_strerror(gai));
        return FOLIO_EINVAL;
    }
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, handler, cls, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                            MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_CONNECTION_LIMIT, 16u,
                                            MHD_OPTION_END);
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    freeaddrinfo(ai);
    if (!d) {
        folio_err_set(err, FOLIO_EIO, "cannot serve %s on %s", strcmp(option, "--metrics-listen") ? "HTTP" : "metrics",
                      listen);
        folio_err_detail(err, "%s", strerror(saved));
        folio_err_hint(err, "is the port in use by another process? pick another %s", option);
        return FOLIO_EIO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int bound = di ? (int)di->port : 0;
    if (port_out)
        *port_out = bound;
    char q[300];
    folio_log(FOLIO_LOG_INFO, event, "addr=%s port=%d", folio_lq(q, sizeof q, host[0] ? host : "*"), bound);
    *out = d;
    return 0;
}

enum MHD_Result http_reply(struct MHD_Connection *c, unsigned int status, const char *ctype, char *body,
                           size_t len)
{
    struct MHD_Response *r = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)
                                  : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}
