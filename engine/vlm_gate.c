/*
 * The driver gate (vlm_gate.h): built-in rules for known-bad drivers, rules
 * from a file, and the match against the opened device. vlm_open runs it
 * right after the device is opened and before any model pipeline exists
 * (vlm.c's top comment says why the order matters).
 */
#include "engine/vlm_gate.h"
#include "engine/vk/vkr.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct vlm_gate_rule BUILTIN[] = {
    {"amd", "radv", "", "26.0.5", VLM_GATE_VISION,
     "Mesa RADV before 26.0.5 corrupts its heap while creating the vision tower's compute "
     "pipelines"},
};

const struct vlm_gate_rule *vlm_gate_builtin(int *n)
{
    *n = (int)(sizeof BUILTIN / sizeof BUILTIN[0]);
    return BUILTIN;
}

static void parse_version(const char *s, uint32_t v[3])
{
    v[0] = v[1] = v[2] = 0;
    for (int i = 0; i < 3 && s && *s; i++) {
        v[i] = (uint32_t)strtoul(s, (char **)&s, 10);
        if (*s != '.')
            break;
        s++;
    }
}

static int vcmp3(const uint32_t a[3], const uint32_t b[3])
{
    for (int i = 0; i < 3; i++)
        if (a[i] != b[i])
            return a[i] < b[i] ? -1 : 1;
    return 0;
}

void vlm_driver_version(const struct vkr_device_info *d, char *out, size_t n)
{
    const char *m = strstr(d->driver_info, "Mesa ");
    if (m && isdigit((unsigned char)m[5])) {
        uint32_t v[3];
        parse_version(m + 5, v);
        snprintf(out, n, "%u.%u.%u", v[0], v[1], v[2]);
        return;
    }
    uint32_t x = d->driver_version;
    if (d->vendor_id == 0x10de)
        snprintf(out, n, "%u.%u.%u", x >> 22, (x >> 14) & 0xff, (x >> 6) & 0xff);
    else
        snprintf(out, n, "%u.%u.%u", x >> 22, (x >> 12) & 0x3ff, x & 0xfff);
}

static int vendor_matches(const char *rule, uint32_t id)
{
    if (!rule[0] || !strcasecmp(rule, "any"))
        return 1;
    static const struct {
        const char *name;
        uint32_t id;
    } names[] = {{"amd", 0x1002}, {"nvidia", 0x10de}, {"intel", 0x8086}, {"mesa", 0x10005},
                 {"arm", 0x13b5}, {"qualcomm", 0x5143}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcasecmp(rule, names[i].name))
            return id == names[i].id;
    char *end;
    unsigned long v = strtoul(rule, &end, 16);
    return *end == 0 && v == id;
}

static int icontains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (!n)
        return 1;
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n))
            return 1;
    return 0;
}

static int rule_matches(const struct vlm_gate_rule *r, const struct vkr_device_info *d,
                        const char *ver)
{
    if (!vendor_matches(r->vendor, d->vendor_id) || !icontains(d->driver_name, r->driver))
        return 0;
    uint32_t v[3], lo[3], hi[3];
    parse_version(ver, v);
    if (r->min_version[0]) {
        parse_version(r->min_version, lo);
        if (vcmp3(v, lo) < 0)
            return 0;
    }
    if (r->max_version[0]) {
        parse_version(r->max_version, hi);
        if (vcmp3(v, hi) >= 0)
            return 0;
    }
    return 1;
}

enum vlm_gate_path vlm_gate_check(const struct vkr_device_info *d,
                                  const struct vlm_gate_rule *extra, int n_extra, char *why,
                                  size_t n)
{
    char ver[32];
    vlm_driver_version(d, ver, sizeof ver);
    int nb;
    const struct vlm_gate_rule *b = vlm_gate_builtin(&nb);
    for (int pass = 0; pass < 2; pass++) {
        const struct vlm_gate_rule *rs = pass ? extra : b;
        int nr = pass ? n_extra : nb;
        for (int i = 0; i < nr; i++)
            if (rule_matches(&rs[i], d, ver)) {
                if (why)
                    snprintf(why, n, "driver gate (%s rule %d): %s [device %s, driver %s %s]",
                             pass ? "config" : "built-in", i + 1, rs[i].reason, d->name,
                             d->driver_name, ver);
                return rs[i].path;
            }
    }
    if (why && n)
        why[0] = 0;
    return VLM_GATE_NONE;
}

static int set_field(char *dst, size_t cap, const char *v, size_t len)
{
    if (len >= cap)
        return -1;
    memcpy(dst, v, len);
    dst[len] = 0;
    return 0;
}

int vlm_gate_parse(const char *text, struct vlm_gate_rule *out, int max, int *n,
                   struct folio_err *err)
{
    *n = 0;
    int line = 0;
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        line++;
        const char *s = p, *e = p + len;
        p = eol ? eol + 1 : p + len;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (s == e || *s == '#')
            continue;
        if (*n >= max)
            return folio_err_set(err, FOLIO_ELIMIT, "driver gate: more than %d rules", max);
        struct vlm_gate_rule r;
        memset(&r, 0, sizeof r);
        r.path = VLM_GATE_NONE;
        while (s < e) {
            while (s < e && isspace((unsigned char)*s))
                s++;
            const char *eq = memchr(s, '=', (size_t)(e - s));
            if (!eq)
                return folio_err_set(err, FOLIO_EINVAL, "driver gate line %d: expected key=value "
                                     "at '%.*s'", line, (int)(e - s), s);
            size_t kl = (size_t)(eq - s);
            const char *v = eq + 1, *ve = v;
            if (kl == 6 && !strncmp(s, "reason", 6))
                ve = e;
            else
                while (ve < e && !isspace((unsigned char)*ve))
                    ve++;
            size_t vl = (size_t)(ve - v);
            int bad = 0;
            if (kl == 6 && !strncmp(s, "vendor", 6))
                bad = set_field(r.vendor, sizeof r.vendor, v, vl);
            else if (kl == 6 && !strncmp(s, "driver", 6))
                bad = set_field(r.driver, sizeof r.driver, v, vl);
            else if (kl == 3 && !strncmp(s, "min", 3))
                bad = set_field(r.min_version, sizeof r.min_version, v, vl);
            else if (kl == 3 && !strncmp(s, "max", 3))
                bad = set_field(r.max_version, sizeof r.max_version, v, vl);
            else if (kl == 6 && !strncmp(s, "reason", 6))
                bad = set_field(r.reason, sizeof r.reason, v, vl);
            else if (kl == 4 && !strncmp(s, "path", 4)) {
                if (vl == 6 && !strncmp(v, "vision", 6))
                    r.path = VLM_GATE_VISION;
                else if (vl == 3 && !strncmp(v, "gpu", 3))
                    r.path = VLM_GATE_GPU;
                else
                    bad = 1;
            } else
                return folio_err_set(err, FOLIO_EINVAL, "driver gate line %d: unknown key "
                                     "'%.*s' (vendor, driver, min, max, path, reason)", line,
                                     (int)kl, s);
            if (bad)
                return folio_err_set(err, FOLIO_EINVAL, "driver gate line %d: bad value for "
                                     "'%.*s'", line, (int)kl, s);
            s = ve;
        }
        if (r.path == VLM_GATE_NONE)
            return folio_err_set(err, FOLIO_EINVAL, "driver gate line %d: path=vision or "
                                 "path=gpu is required", line);
        if (!r.reason[0])
            snprintf(r.reason, sizeof r.reason, "configured driver rule");
        out[(*n)++] = r;
    }
    return 0;
}

