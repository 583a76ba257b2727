/* libpq connection helpers: one place that turns libpq failures into
 * folio errors with the server's detail and a hint.
 *
 * Pooler mode (--pooler transaction, $FOLIO_DB_POOLER): behind a
 * transaction-mode pooler (PgBouncer 1.18 in Debian 12) consecutive
 * transactions of one client may run on different server sessions, and a
 * session's state leaks to whichever client gets that server next. A
 * connection opened in that mode is marked (libpq instance data, so the
 * mark travels with the PGconn and needs no global), and code that would
 * leave session state asks db_pooled() first: the queue sends unnamed
 * statements instead of named prepared ones, the worker does not LISTEN
 * there. The only SET kept is the time zone, which PgBouncer tracks and
 * re-applies per client. */
#include "pipeline/db/db.h"
#include "common/json.h"

#include <libpq-events.h>
#include <stdlib.h>
#include <string.h>

/* The mark's address is all that matters; nothing ever writes it. */
static const char POOLED_MARK = 1;

static int pooled_event(PGEventId id, void *info, void *pass)
{
    (void)id;
    (void)info;
    (void)pass;
    return 1;
}

int db_pooler_parse(const char *s, enum db_pooler *out, struct folio_err *err)
{
    if (!s || !s[0] || strcmp(s, "none") == 0 || strcmp(s, "session") == 0) {
        /* A session-mode pooler keeps one server per client: direct rules apply. */
        *out = DB_POOLER_NONE;
        return 0;
    }
    if (strcmp(s, "transaction") == 0) {
        *out = DB_POOLER_TRANSACTION;
        return 0;
    }
    folio_err_set(err, FOLIO_EINVAL, "unknown pooler mode '%s'", s);
    folio_err_hint(err, "use --pooler transaction (PgBouncer pool_mode = transaction), or none for a direct "
                        "or session-mode connection; $FOLIO_DB_POOLER takes the same values");
    return FOLIO_EINVAL;
}

int db_pooler_resolve(const char *flag_value, enum db_pooler *out, struct folio_err *err)
{
    if (flag_value)
        return db_pooler_parse(flag_value, out, err);
    return db_pooler_parse(getenv("FOLIO_DB_POOLER"), out, err);
}

int db_pooled(const PGconn *c) { return c && PQinstanceData(c, pooled_event) == &POOLED_MARK; }


int db_hide_password_arg(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        char *v = NULL;
        int take = 0;
        if (strcmp(argv[i], "--db") == 0 && i + 1 < argc) {
            v = argv[i + 1];
            take = 2;
        } else if (strncmp(argv[i], "--db=", 5) == 0) {
            v = argv[i] + 5;
            take = 1;
        }
        if (!v)
            continue;
        char probe[2048];
        snprintf(probe, sizeof probe, "%s", v);
        db_scrub(probe, sizeof probe, v);
        if (strcmp(probe, v) == 0)
            return argc; /* no password in it: leave the command line alone */
        /* The environment (mode 0400 in /proc) instead of the command line
         * (world-readable), and db_conninfo() falls back to it; a re-exec
         * then carries no password either. */
        if (setenv("FOLIO_DB", v, 1) != 0)
            return argc;
        for (char *c = v; *c; c++)
            *c = 'x';
        for (int k = i; k + take <= argc; k++)
            argv[k] = argv[k + take];
        return argc - take;
    }
    return argc;
}

const char *db_conninfo(const char *flag_value)
{
    if (flag_value && flag_value[0])
        return flag_value;
    const char *e = getenv("FOLIO_DB");
    if (e && e[0])
        return e;
    return "";
}

/* Replaces every occurrence of the n bytes at secret in msg by "***". */
static void redact(char *msg, size_t cap, const char *secret, size_t n)
{
    if (n == 0)
        return;
    (void)cap; /* the text only ever shrinks */
    for (char *p = msg; (p = memmem(p, strlen(p), secret, n)) != NULL;) {
        if (n < 3) { /* too short to shrink: star it out in place */
            memset(p, '*', n);
            p += n;
            continue;
        }
        memmove(p + 3, p + n, strlen(p + n) + 1);
        memcpy(p, "***", 3);
        p += 3;
    }
}

void db_scrub(char *msg, size_t cap, const char *conninfo)
{
    if (!conninfo || !conninfo[0])
        return;
    /* key=value form: password = value, bare or single-quoted */
    for (const char *p = conninfo; (p = strstr(p, "password")) != NULL;) {
        const char *v = p + 8;
        while (*v == ' ' || *v == '\t')
            v++;
        p += 8;
        if (*v != '=')
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t n = 0;
        if (*v == '\'') {
            v++;
            while (v[n] && v[n] != '\'')
                n += v[n] == '\\' && v[n + 1] ? 2 : 1;
        } else {
            /* bare value; in a URI query it ends at '&' */
            while (v[n] && v[n] != ' ' && v[n] != '\t' && v[n] != '&' && v[n] != '#')
                n++;
        }
        redact(msg, cap, v, n);
    }
    /* URI form: scheme://user:password@host */
    const char *sch = strstr(conninfo, "://");
    if (sch) {
        const char *ui = sch + 3, *at = strchr(ui, '@');
        const char *end = ui + strcspn(ui, "/?");
        if (at && at < end) {
            const char *colon = memchr(ui, ':', (size_t)(at - ui));
            if (colon)
                redact(msg, cap, colon + 1, (size_t)(at - colon - 1));
        }
    }
}

/* Server NOTICE/WARNING messages as logfmt lines, not libpq's raw
 * "NOTICE:  ..." on stderr between folio's own log lines. */
static void notice_to_log(void *arg, const char *message)
{
    (void)arg;
    char q[1100];
    size_t n = strlen(message);
    while (n && (message[n - 1] == '\n' || message[n - 1] == ' '))
        n--;
    folio_log(strncmp(message, "WARNING", 7) == 0 ? FOLIO_LOG_WARN : FOLIO_LOG_INFO, "db_notice", "text=%s",
              folio_lq_bytes(q, sizeof q, message, n));
}

int db_connect(const char *conninfo, const char *app_name, PGconn **out,
               struct folio_err *err)
{
    return db_open(conninfo, DB_POOLER_NONE, app_name, out, err);
}

int db_open(const char *conninfo, enum db_pooler pooler, const char *app_name, PGconn **out,
            struct folio_err *err)
{
    *out = NULL;
    const char *keys[] = {"dbname", "application_name", "connect_timeout", NULL};
    const char *vals[] = {conninfo, app_name ? app_name : "folio", "10", NULL};
    /* expand_dbname=1 lets conninfo be a "key=value" string or a URI while
     * still setting application_name. */
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (!c)
        return folio_err_set(err, FOLIO_ENOMEM, "cannot allocate a libpq connection");
    if (PQstatus(c) != CONNECTION_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", PQerrorMessage(c));
        size_t l = strlen(msg);
        while (l && (msg[l - 1] == '\n' || msg[l - 1] == ' '))
            msg[--l] = '\0';
        PQfinish(c);
        /* libpq quotes parts of a malformed conninfo back, password included */
        db_scrub(msg, sizeof msg, conninfo);
        folio_err_set(err, FOLIO_EDB, "cannot connect to PostgreSQL");
        folio_err_detail(err, "%s", msg);
        /* Say where the conninfo really came from: an empty one means
         * libpq's defaults, a non-empty one equal to $FOLIO_DB came from the
         * environment, anything else from --db (or the config file's db =). */
        const char *env = getenv("FOLIO_DB");
        const char *from = !conninfo[0] ? "FOLIO_DB is not set and no --db was given: libpq's defaults were used "
                                          "(PG* variables, the local socket)"
                           : env && strcmp(env, conninfo) == 0 ? "the conninfo came from $FOLIO_DB"
                                                               : "the conninfo came from --db or the config file";
        folio_err_hint(err,
                       "pass --db 'host=... dbname=...' or set FOLIO_DB (%s); "
                       "for a local test server run: ops/pg-local.sh start ./var/pg",
                       from);
        return FOLIO_EDB;
    }
    if (pooler == DB_POOLER_TRANSACTION &&
        (!PQregisterEventProc(c, pooled_event, "folio-pooled", NULL) ||
         !PQsetInstanceData(c, pooled_event, (void *)&POOLED_MARK))) {
        PQfinish(c);
        return folio_err_set(err, FOLIO_ENOMEM, "cannot mark a libpq connection as pooled");
    }
    PQsetNoticeProcessor(c, notice_to_log, NULL);
    PGresult *r = PQexec(c, "SET TIME ZONE 'UTC'");
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        db_err_from_result(r, c, "setting up the session", err);
        PQfinish(c);
        return FOLIO_EDB;
    }
    PQclear(r);
    *out = c;
    return 0;
}

int db_err_from_result(PGresult *r, PGconn *c, const char *what, struct folio_err *err)
{
    const char *primary = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *detail = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_DETAIL) : NULL;
    const char *hint = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_HINT) : NULL;
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    char connmsg[400] = "";
    if (!primary && c) {
        snprintf(connmsg, sizeof connmsg, "%s", PQerrorMessage(c));
        size_t l = strlen(connmsg);
        while (l && connmsg[l - 1] == '\n')
            connmsg[--l] = '\0';
        primary = connmsg[0] ? connmsg : "no result from server";
    }
    folio_err_set(err, FOLIO_EDB, "%s: %s%s%s%s", what, primary ? primary : "unknown error",
                  state ? " (SQLSTATE " : "", state ? state : "", state ? ")" : "");
    if (detail)
        folio_err_detail(err, "%s", detail);
    if (hint)
        folio_err_hint(err, "%s", hint);
    if (r)
        PQclear(r);
    return FOLIO_EDB;
}

int db_exec(PGconn *c, const char *sql, struct folio_err *err)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "database statement failed", err);
    PQclear(r);
    return 0;
}

int db_conn_broken(PGconn *c) { return !c || PQstatus(c) != CONNECTION_OK; }

int db_sqlstate_transient(const char *st)
{
    if (!st || strlen(st) != 5)
        return 0;
    static const char *const classes[] = {
        "08", /* connection exception */
        "40", /* transaction rollback: serialization failure, deadlock, completion unknown */
        "53", /* insufficient resources: disk full, out of memory, too many connections */
        "58", /* system error: I/O error, undefined file (a crashed relation mid-recovery) */
    };
    static const char *const states[] = {
        "57014", /* query_canceled: statement_timeout, or an admin's pg_cancel_backend */
        "55P03", /* lock_not_available: lock_timeout (VACUUM FULL, ALTER TABLE hold the table) */
        "55006", /* object_in_use */
        "25006", /* read_only_sql_transaction: connected to a standby mid-failover */
        "57P01", "57P02", "57P03", /* admin shutdown, crash shutdown, cannot connect now */
        "57P05", /* idle_session_timeout */
        "25P03", /* idle_in_transaction_session_timeout */
    };
    for (size_t i = 0; i < sizeof classes / sizeof *classes; i++)
        if (strncmp(st, classes[i], 2) == 0)
            return 1;
    for (size_t i = 0; i < sizeof states / sizeof *states; i++)
        if (strcmp(st, states[i]) == 0)
            return 1;
    return 0;
}

#define DB_STR_(x) #x
#define DB_STR(x) DB_STR_(x)

int db_resolve_doc(PGconn *c, const char *doc, long long *id, struct folio_err *err)
{
    *id = 0;
    const char *p[1] = {doc};
    PGresult *r = PQexecParams(c,
                               "SELECT id FROM folio.documents WHERE"
                               " ($1 ~ '^[0-9]{1,18}$' AND id = $1::bigint) OR"
                               " ($1 ~* '^[0-9a-f]{" DB_STR(DB_DOC_PREFIX_MIN) ",64}$'"
                               "  AND encode(sha256, 'hex') LIKE lower($1) || '%')"
                               " UNION SELECT document_id FROM folio.document_sources"
                               " WHERE name_display = $1 OR path_display = $1 LIMIT 2",
                               1, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        return db_err_from_result(r, c, "looking up the document", err);
    int n = PQntuples(r);
    if (n == 1)
        *id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    if (n == 1)
        return 0;
    size_t l = strlen(doc);
    if (n == 0) {
        folio_err_set(err, FOLIO_EINVAL, "no document matches '%s'", doc);
        if (l < DB_DOC_PREFIX_MIN && l > 0 && strspn(doc, "0123456789abcdefABCDEF") == l)
            folio_err_detail(err, "a sha256 prefix needs at least %d hex digits", DB_DOC_PREFIX_MIN);
        folio_err_hint(err, "DOC is %s; 'folio export' lists them", DB_DOC_HELP);
    } else {
        folio_err_set(err, FOLIO_EINVAL, "'%s' matches several documents", doc);
        folio_err_hint(err, "give more of the sha256, or the document id");
    }
    return FOLIO_EINVAL;
}

void db_array_elem(struct json_buf *b, const char *s)
{
    json_raw(b, "\"");
    for (const char *p = s; *p; p++) {
        char one[3] = {*p == '"' || *p == '\\' ? '\\' : *p, *p == '"' || *p == '\\' ? *p : 0, 0};
        json_raw(b, one);
    }
    json_raw(b, "\"");
}
