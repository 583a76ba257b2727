/* libmicrohttpd servers (http.h). */
#include "pipeline/service/http.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connections served at once; beyond it a request is answered 503 (busy)
 * and its connection closed, up to HTTP_HARD_LIMIT open connections,
 * which libmicrohttpd enforces by closing new ones. Idle connections go
 * after HTTP_IDLE_S. */
#define HTTP_SOFT_LIMIT 16
#define HTTP_HARD_LIMIT 64
#define HTTP_IDLE_S 10

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

/* libmicrohttpd's own messages, as logfmt lines. */
static void http_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[400], q[900];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    folio_log(FOLIO_LOG_WARN, "http_error", "msg=%s", folio_lq(q, sizeof q, msg));
}

int http_busy(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_DAEMON);
    const union MHD_DaemonInfo *di = ci ? MHD_get_daemon_info(ci->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS) : NULL;
    return di && di->num_connections > HTTP_SOFT_LIMIT;
}

enum MHD_Result http_refuse_busy(struct MHD_Connection *c)
{
    static const char body[] = "busy: too many connections, retry in a second\n";
    struct MHD_Response *r = MHD_create_response_from_buffer(sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    MHD_add_response_header(r, "Retry-After", "1");
    MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_SERVICE_UNAVAILABLE, r);
    MHD_destroy_response(r);
    return ok;
}

int http_start(const char *option, const char *listen_at, const char *event, MHD_AccessHandlerCallback handler,
               void *cls, struct MHD_Daemon **out, int *port_out, struct folio_err *err)
{
    *out = NULL;
    char host[256], port[16];
    if (split_listen(option, listen_at, host, sizeof host, port, sizeof port, err))
        return FOLIO_EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gai != 0 || !ai) {
        folio_err_set(err, FOLIO_EINVAL, "%s %s: cannot resolve '%s'", option, listen_at, host);
        folio_err_detail(err, "%s", gai_strerror(gai));
        return FOLIO_EINVAL;
    }
    const char *what = strcmp(option, "--metrics-listen") ? "HTTP" : "metrics";
    /* Bound here, not by libmicrohttpd: a failure is folio's error with
     * the address asked for (its own line named another port). */
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        folio_err_set(err, FOLIO_EIO, "cannot serve %s on %s: %s", what, listen_at, strerror(e));
        folio_err_hint(err, e == EADDRINUSE ? "another process listens there; stop it or pick another %s"
                                            : "check the address (is it this host's?) or pick another %s",
                       option);
        return FOLIO_EIO;
    }
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    freeaddrinfo(ai);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    /* the logger first: options before it log through libmicrohttpd's own */
    struct MHD_Daemon *d = MHD_start_daemon(flags, 0, NULL, NULL, handler, cls, MHD_OPTION_EXTERNAL_LOGGER, http_log,
                                            NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_IDLE_S,
                                            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_HARD_LIMIT,
                                            MHD_OPTION_END);
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!d) {
        close(fd);
        folio_err_set(err, FOLIO_EIO, "cannot serve %s on %s: %s", what, listen_at, strerror(saved));
        folio_err_hint(err, "the HTTP server did not start (see the http_error line above)");
        return FOLIO_EIO;
    }
    int bound = 0;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        bound = sa.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&sa)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&sa)->sin_port);
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
