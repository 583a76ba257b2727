/*
 * The fault-injection registry (see fault.h). Parsing is a scan of a
 * short environment string per query: test builds only, and the queries
 * sit where a real failure would be handled, never in an inner loop.
 */
#include "common/fault.h"

#include "common/common.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const site_names[FOLIO_FAULT_NSITES] = {
#define FOLIO_FAULT_NAME(name, arg, what) #name,
    FOLIO_FAULT_SITES(FOLIO_FAULT_NAME)
#undef FOLIO_FAULT_NAME
};

const char *folio_fault_name(enum folio_fault_site site)
{
    assert(site >= 0 && site < FOLIO_FAULT_NSITES);
    return site_names[site];
}

#ifdef FOLIO_FAULT_INJECTION
int folio_fault_built(void) { return 1; }

static int known_site(const char *name, size_t n)
{
    for (int i = 0; i < FOLIO_FAULT_NSITES; i++)
        if (strlen(site_names[i]) == n && memcmp(site_names[i], name, n) == 0)
            return 1;
    return 0;
}

/* Finds site in FOLIO_FAULT (its first entry, or the one whose ARG equals
 * want when want is non-NULL); *arg and *alen get the ARG (maybe empty). */
static int lookup(enum folio_fault_site site, const char *want, const char **arg, size_t *alen)
{
    static atomic_int warned;
    const char *name = folio_fault_name(site);
    size_t nl = strlen(name);
    const char *f = getenv("FOLIO_FAULT");
    int found = 0;
    for (const char *e = f; e && *e && !found;) {
        size_t el = strcspn(e, ",");
        const char *colon = memchr(e, ':', el);
        size_t kl = colon ? (size_t)(colon - e) : el;
        const char *a = colon ? colon + 1 : e + el;
        size_t al = colon ? el - kl - 1 : 0;
        if (kl == nl && memcmp(e, name, nl) == 0 &&
            (!want || (strlen(want) == al && memcmp(a, want, al) == 0))) {
            *arg = a;
            *alen = al;
            found = 1;
        } else if (kl && !known_site(e, kl) && !atomic_exchange(&warned, 1)) {
            char q[96], s[96];
            snprintf(s, sizeof s, "%.*s", (int)kl, e);
            folio_log(FOLIO_LOG_WARN, "fault_unknown", "site=%s msg=%s", folio_lq(q, sizeof q, s),
                      "FOLIO_FAULT names no fault site (common/fault.h lists them)");
        }
        e += el;
        if (*e == ',')
            e++;
    }
    return found;
}

int folio_fault(enum folio_fault_site site, const char *arg)
{
    const char *a;
    size_t al;
    return lookup(site, arg, &a, &al);
}

int folio_fault_arg(enum folio_fault_site site, char *out, size_t n)
{
    const char *a;
    size_t al;
    if (!lookup(site, NULL, &a, &al))
        return 0;
    if (n)
        snprintf(out, n, "%.*s", (int)al, a);
    return 1;
}

long folio_fault_num(enum folio_fault_site site)
{
    char a[32];
    if (!folio_fault_arg(site, a, sizeof a) || !a[0] || strspn(a, "0123456789") != strlen(a))
        return 0;
    return strtol(a, NULL, 10);
}
#else
int folio_fault_built(void) { return 0; }

int folio_fault(enum folio_fault_site site, const char *arg)
{
    (void)site;
    (void)arg;
    return 0;
}

int folio_fault_arg(enum folio_fault_site site, char *out, size_t n)
{
    (void)site;
    if (n)
        out[0] = '\0';
    return 0;
}

long folio_fault_num(enum folio_fault_site site)
{
    (void)site;
    return 0;
}
#endif
